"""XLNet's permutation language modeling data: targets, layout, factorization order.

Dimensions: B batch, S sequence, T predictions per sequence (`num_predict`).

When records are written, `choose_plm_targets` picks the tokens to predict as whole-word
n-grams (n = 1..5 with P(n) proportional to 1/n, about one n-gram per 6n tokens of context),
topped up with single tokens to exactly T, as zihangdai/xlnet's `_sample_mask` does.
Inside tf.data, for every batch:

  layout     [CLS] A [SEP] B [SEP]  ->  A [SEP] B [SEP] [CLS], segments 0.. 1.. 2
  order      a random factorization order per example, permuted within blocks of
             `perm_size` positions (later blocks follow earlier ones)
  perm_mask  [B, S, S], 1 where i may not see j: a target or [SEP]/[CLS] j is hidden from
             every i not after it in the order (a target also from itself); every other
             token is seen by all and sees only such tokens
  targets    target_mapping [B, T, S] one-hot, their ids [B, T] and weights [B, T]

The order is drawn statelessly from the batch's seed: a resumed run draws what an
uninterrupted one would.
"""

import numpy as np

from bertlayers.pretraining_data.mlm_masking import word_groups
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

MAX_GRAM = 5
CONTEXT_PER_TARGET = 6  # XLNet's mask_alpha / mask_beta


def choose_plm_targets(token_ids, vocab, num_predict, rng, max_gram=MAX_GRAM, context=CONTEXT_PER_TARGET):
    """0/1 per position: the `num_predict` (or fewer, in a short sequence) targets.

    Walks the words left to right: draws n, skips a random part of n · context words, takes
    the next n whole words, skips the rest of the context; then adds random single tokens
    until `num_predict`. [CLS], [SEP] and [PAD] are never targets.
    """
    words = word_groups(token_ids, vocab, by_word=True)
    chosen = np.zeros(len(token_ids), dtype=np.int64)
    grams = np.arange(1, max_gram + 1)
    probabilities = (1.0 / grams) / np.sum(1.0 / grams)
    count, word = 0, 0
    while word < len(words) and count < num_predict:
        n = min(int(rng.choice(grams, p=probabilities)), num_predict - count)
        span = n * context
        left = int(rng.integers(span))
        begin = word + left
        if begin + n > len(words):
            break
        positions = [p for group in words[begin : begin + n] for p in group][: num_predict - count]
        chosen[positions] = 1
        count += len(positions)
        word = begin + n + (span - left)
    candidates = [p for group in words for p in group if not chosen[p]]
    extra = min(num_predict - count, len(candidates))
    if extra > 0:
        chosen[rng.choice(candidates, extra, replace=False)] = 1
    return chosen


def xlnet_layout(token_ids, segment_ids, padding_mask, values, cls_id):
    """`[CLS] A [SEP] B [SEP]` rows to XLNet's `A [SEP] B [SEP] [CLS]` (segment 2 for [CLS]).

    Args:
      token_ids, segment_ids, padding_mask: int `[B, S]` in BERT's layout, padded on the right.
      values: int `[B, S]` per-position values moving with their tokens (the targets);
        [CLS] gets 0.
      cls_id: the [CLS] id.

    Returns:
      token_ids, segment_ids, values `[B, S]` in XLNet's layout (the padding mask is unchanged).
    """
    length = tf.shape(token_ids)[1]
    last = tf.reduce_sum(padding_mask, axis=1, keepdims=True) - 1  # [B, 1]: where [CLS] goes
    positions = tf.range(length)[tf.newaxis, :]

    def moved(x, at_last):
        shifted = tf.pad(x[:, 1:], [[0, 0], [0, 1]])
        return tf.where(positions == last, at_last, tf.where(positions < last, shifted, tf.zeros_like(x)))

    return moved(token_ids, cls_id), moved(segment_ids, 2), moved(values, 0)


def factorization_masks(token_ids, padding_mask, is_target, functional_ids, seed, perm_size, num_predict):
    """A sampled factorization order per example, as XLNet's attention needs it.

    Args:
      token_ids, padding_mask, is_target: int `[B, S]` (XLNet's layout).
      functional_ids: ids ordered like targets but never predicted ([SEP], [CLS]).
      seed: int `[2]`.
      perm_size: permute within blocks of this many positions.
      num_predict: T.

    Returns:
      perm_mask float32 `[B, S, S]`, target_positions int32 `[B, T]`, target_weights float32
      `[B, T]` (0 for unused predictions, whose positions are 0).
    """
    shape = tf.shape(token_ids)
    real = tf.not_equal(padding_mask, 0)
    functional = tf.zeros_like(real)
    for special in functional_ids:
        functional |= tf.equal(token_ids, special)
    target = tf.not_equal(is_target, 0) & ~functional & real
    ordered = target | functional  # what the order hides: "masked or functional"

    # Order key: the block index plus a uniform draw: sorting by it permutes each block.
    block = tf.cast(tf.range(shape[1]) // perm_size, tf.float32)[tf.newaxis, :]
    key = block + tf.random.stateless_uniform(shape, seed)
    key = tf.where(ordered, key, -1.0)  # the rest come first: seen by all, seeing none of the ordered
    after = key[:, :, tf.newaxis] < key[:, tf.newaxis, :]  # [B, S, S]: j after i
    itself = tf.eye(shape[1], dtype=tf.bool)[tf.newaxis] & target[:, :, tf.newaxis]
    perm_mask = ordered[:, tf.newaxis, :] & (after | itself)

    index = tf.range(shape[1])[tf.newaxis, :]
    order = tf.argsort(tf.where(target, index, shape[1] + index), axis=1)[:, :num_predict]  # targets first
    valid = tf.gather(target, order, batch_dims=1)
    positions = tf.where(valid, order, 0)
    return tf.cast(perm_mask, tf.float32), positions, tf.cast(valid, tf.float32)
