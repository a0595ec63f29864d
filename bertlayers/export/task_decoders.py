"""Decoding a task's logits into its answer inside the served graph: SQuAD's best span (the CRF's
Viterbi tags and a classifier's label names are decoded by their `serving_outputs` adapters)."""

from bertlayers.layers.masking import mask_logits
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)


def best_span(start_logits, end_logits, start_allowed, end_allowed, max_answer_length):
    """The best (start, end) with end ≥ start, length ≤ `max_answer_length`, the start where
    `start_allowed` and the end where `end_allowed` (bool `[b, seq]`: context pieces that begin /
    finish a word, so no answer is cut inside a word), its score, and the null ([CLS]) score."""
    scores = tf.expand_dims(start_logits, 2) + tf.expand_dims(end_logits, 1)  # [b, start, end]
    # A request shorter than the answer limit has fewer columns than the band's width, which
    # band_part refuses: the band is then the whole upper triangle.
    width = tf.minimum(max_answer_length - 1, tf.shape(scores)[-1] - 1)
    band = tf.linalg.band_part(tf.ones_like(scores[0], tf.bool), 0, width)
    band = tf.logical_and(band, tf.pad(tf.ones_like(band[1:, 1:]), [[1, 0], [1, 0]]))  # not [CLS]
    allowed = tf.logical_and(tf.expand_dims(start_allowed, 2), tf.expand_dims(end_allowed, 1))
    scores = mask_logits(scores, tf.logical_and(tf.expand_dims(band, 0), allowed))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [b, start * end]
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    length = tf.shape(scores)[2]
    return best // length, best % length, tf.reduce_max(flat, axis=-1), start_logits[:, 0] + end_logits[:, 0]
