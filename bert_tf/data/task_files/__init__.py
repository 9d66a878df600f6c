"""Readers of the fine-tuning tasks' raw files (GLUE TSV, CoNLL, SQuAD JSON, SWAG CSV) and
SQuAD's answers from the model's logits."""
