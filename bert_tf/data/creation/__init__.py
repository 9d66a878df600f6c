"""Pretraining data creation: text files to sharded masked-LM and next-sentence TFRecords,
on one machine or on Apache Beam."""
