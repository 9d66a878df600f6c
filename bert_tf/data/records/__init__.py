"""Record formats and their readers: the features of every TFRecord kind, the files read
with or without TensorFlow, and the one order both engines read rows in."""
