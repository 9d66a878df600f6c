"""The command-line tools, thin absl scripts over bert_tf.

Run from a checkout as `python tools/<name>.py`; `pip install .` installs this folder
as bert_tf.tools and each tool's run() as a console command (setup.py's CONSOLE_SCRIPTS).
"""
