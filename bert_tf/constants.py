"""Names shared by the data readers, the models and the serving signatures, and the
released encoder sizes.

Each name is written once here; everything else imports it. The module imports
nothing, so that the benchmarks' peer workers, in environments without this library's
dependencies, read it too (bench/peers/protocol.py).
"""

# (num_layers, hidden_size, num_attention_heads) of the released BERT sizes; the
# intermediate size is 4 * hidden_size.
ENCODER_SIZES = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

# Model inputs, as TF Hub BERT encoders name them.
INPUT_WORD_IDS = "input_word_ids"
INPUT_MASK = "input_mask"
INPUT_TYPE_IDS = "input_type_ids"
ENCODER_INPUTS = (INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS)
# Extra inputs of rows that pack several examples (BertEncoder.call_packed): each
# token's position within its example and its example's number within the row.
INPUT_POSITION_IDS = "input_position_ids"
INPUT_EXAMPLE_IDS = "input_example_ids"
# Per packed row, the [CLS] position of each of its examples; per example, its slot
# among them (bert_tf.data.pipelines.example_packing).
PACKED_CLS_POSITIONS = "packed_cls_positions"
PACKED_EXAMPLE_SLOTS = "packed_example_slots"
PACKED_INPUTS = (INPUT_POSITION_IDS, INPUT_EXAMPLE_IDS, PACKED_CLS_POSITIONS,
                 PACKED_EXAMPLE_SLOTS)

# Encoder outputs.
SEQUENCE_OUTPUT = "sequence_output"
POOLED_OUTPUT = "pooled_output"
ENCODER_OUTPUTS = "encoder_outputs"

# Pretraining model inputs and outputs.
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"
MLM_LOGITS = "mlm_logits"
NSP_LOGITS = "next_sentence_logits"

# Fine-tuning labels and bookkeeping, in batches and in TFRecords (the original
# release's fine-tuning records name the labels `label_ids` too).
LABEL_IDS = "label_ids"
EXAMPLE_INDEX = "example_index"
# Tagging: which window of its sentence a row is (sentences longer than the model are
# read in overlapping windows).
WINDOW_INDEX = "window_index"
# The label of word pieces that are not scored (every piece but a word's first;
# [CLS], [SEP] and padding).
IGNORE_LABEL = -1

# Keras names the state variable of every SeedGenerator (dropout) so: the random state
# a trainer checkpoints, by name on every backend.
SEED_STATE_NAME = "seed_generator_state"

# Feature names of the original BERT release's pretraining TFRecords.
TFRECORD_INPUT_IDS = "input_ids"
TFRECORD_INPUT_MASK = "input_mask"
TFRECORD_SEGMENT_IDS = "segment_ids"
TFRECORD_MASKED_LM_POSITIONS = "masked_lm_positions"
TFRECORD_MASKED_LM_IDS = "masked_lm_ids"
TFRECORD_MASKED_LM_WEIGHTS = "masked_lm_weights"
TFRECORD_NEXT_SENTENCE_LABELS = "next_sentence_labels"

# Maps the original release's TFRecord features to this library's input names.
TFRECORD_TO_MODEL_INPUT = {
    TFRECORD_INPUT_IDS: INPUT_WORD_IDS,
    TFRECORD_INPUT_MASK: INPUT_MASK,
    TFRECORD_SEGMENT_IDS: INPUT_TYPE_IDS,
    TFRECORD_MASKED_LM_POSITIONS: MASKED_LM_POSITIONS,
    TFRECORD_MASKED_LM_IDS: MASKED_LM_IDS,
    TFRECORD_MASKED_LM_WEIGHTS: MASKED_LM_WEIGHTS,
    TFRECORD_NEXT_SENTENCE_LABELS: NEXT_SENTENCE_LABELS,
}

# The optimizer state's names, the same on both engines (bert_tf.training.update_rule)
# and in the portable checkpoint's `optimizer/` group: the update count, each trainable
# variable's slots as `<slot>/<variable path>` (Adam's moments `m` and `v`), and the
# dynamic loss scale with its count of finite steps in a row.
OPTIMIZER_COUNT = "count"
ADAM_SLOTS = ("m", "v")
LOSS_SCALE = "loss_scale/scale"
LOSS_SCALE_GOOD_STEPS = "loss_scale/good_steps"

# Special WordPiece tokens. Their ids are always looked up in the vocab.
PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)
