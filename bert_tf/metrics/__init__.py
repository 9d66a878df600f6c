"""Evaluation metrics computed in NumPy from gathered predictions."""

from bert_tf.metrics.classification import (accuracy, f1_score, matthews_corrcoef,
                                            pearson_corrcoef, spearman_corrcoef, rank_with_ties,
                                            GLUE_METRICS, glue_metrics)
from bert_tf.metrics.tagging import (Entity, extract_entities, conll_precision_recall_f1)
