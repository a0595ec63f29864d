"""One vector per sequence from its token states, over its real tokens: the mean, the first or
last token, the maximum, a position-weighted mean or the sum over the square root of the length
(sentence-transformers' pooling modes), optionally L2-normalized (sentence embeddings)."""

import keras
from keras import ops

from bertlayers import backend

POOLING_MODES = ("mean", "first", "max", "last", "weighted_mean", "mean_sqrt_len")


@keras.saving.register_keras_serializable(package="bertlayers")
class SequencePooling(keras.layers.Layer):
    """pooled = `mode` of `sequence` over the real tokens; no weights.

    Sentence-transformers' models (all-MiniLM-L6-v2 among them) are trained with "mean";
    "first" reads [CLS] as it is, without `Pooler`'s dense + tanh. The modes are
    sentence-transformers' (its names in brackets), with padding on either side:

    - "mean" (mean): the mean of the real tokens' states;
    - "first" (cls): the first real token's;
    - "last" (lasttoken): the last real token's (decoders used as encoders);
    - "max" (max): the element-wise maximum over the real tokens;
    - "weighted_mean" (weightedmean): a mean weighting the i-th real token by i (1, 2, ...);
    - "mean_sqrt_len" (mean_sqrt_len_tokens): the sum over the square root of the count.

    Args:
      mode: one of the above.
      normalize: divide each pooled vector by its L2 norm (cosine similarity is then a dot product).
      skip_token_id: a token id never pooled, even at a real position (transformers' decoder
        classifiers read the last token whose id is not `pad_token_id`: an end-of-text token that
        doubles as the pad token is passed over); needs `token_ids` in the call.

    Call args:
      sequence: `[batch, seq, H]`.
      padding_mask: `[batch, seq]`, nonzero at real tokens (default: every position is real).
      prompt_length: int `[batch]`, the leading real tokens left out of the pooling ([CLS] and a
        prompt's pieces: sentence-transformers' `include_prompt=False`, padding on either side). The
        weighted mean still counts a token's weight from the first real token, prompt included, as
        sentence-transformers does.
      token_ids: int `[batch, seq]`, read for `skip_token_id`.

    Returns:
      `[batch, H]`, in the layer's compute dtype (sums taken in float32).
    """

    def __init__(self, mode: str = "mean", normalize: bool = False, skip_token_id: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise ValueError(f"SequencePooling mode must be one of {POOLING_MODES}, got {mode!r}.")
        self.mode = mode
        self.normalize = bool(normalize)
        self.skip_token_id = None if skip_token_id is None else int(skip_token_id)

    def build(self, sequence_shape, padding_mask_shape=None, prompt_length_shape=None, token_ids_shape=None):
        self.built = True

    def call(self, sequence, padding_mask=None, prompt_length=None, token_ids=None):
        values = ops.cast(sequence, "float32")  # [batch, seq, H]
        if padding_mask is None:
            real = ops.ones_like(values[:, :, :1])
        else:
            real = ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), "float32"), -1)  # [batch, seq, 1]
        if self.skip_token_id is not None:
            if token_ids is None:
                raise ValueError(f"SequencePooling(skip_token_id={self.skip_token_id}) needs token_ids.")
            kept = ops.cast(ops.not_equal(token_ids, self.skip_token_id), "float32")
            real = real * ops.expand_dims(kept, -1)
        # The i-th real token's weight (weighted_mean), counted before the prompt is left out.
        ranks = ops.cumsum(real, axis=1) * real  # [batch, seq, 1]
        if prompt_length is not None:
            kept = ops.cast(ranks > ops.cast(ops.reshape(prompt_length, (-1, 1, 1)), "float32"), "float32")
            real = real * kept
        count = ops.sum(real, axis=1)  # [batch, 1]
        if self.mode in ("first", "last"):
            # The first (last) position holding a real token, padding on either side: [batch]. In
            # integers: Keras's float argmax adds a sign-bit test TFLite has no kernel for.
            length = ops.shape(values)[1]
            order = ops.arange(length, dtype="int32")[None, :]
            mask = ops.cast(real[:, :, 0] > 0, "int32")
            rank = order + 1 if self.mode == "last" else length - order
            position = ops.argmax(mask * rank, axis=1)
            pooled = backend.rows_at(values, position[:, None])[:, 0, :]
        elif self.mode == "max":
            # Padding can never win: it is pushed far below any real state.
            pooled = ops.max(values * real - (1.0 - real) * 1e30, axis=1)
        elif self.mode == "weighted_mean":
            # The i-th real token weighs i, counted from the first real one (left padding too).
            weights = ranks * real  # [batch, seq, 1]
            pooled = ops.sum(values * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1e-9)
        else:
            total = ops.sum(values * real, axis=1)
            if self.mode == "mean":
                pooled = total / ops.maximum(count, 1.0)
            else:
                pooled = total / ops.sqrt(ops.maximum(count, 1e-9))
        if self.normalize:
            pooled = unit_length(pooled)
        return ops.cast(pooled, self.compute_dtype)  # [batch, H]

    def compute_output_shape(
        self, sequence_shape, padding_mask_shape=None, prompt_length_shape=None, token_ids_shape=None
    ):
        return (sequence_shape[0], sequence_shape[-1])

    def get_config(self):
        return {
            **super().get_config(),
            "mode": self.mode,
            "normalize": self.normalize,
            "skip_token_id": self.skip_token_id,
        }


def unit_length(vectors):
    """`vectors` divided by their L2 norm along the last axis (sentence-transformers' `Normalize`:
    a norm below 1e-12 counts as 1e-12). The floor goes under the square root: a zero vector (a
    padding row) then has a finite gradient, where the norm's own is 0/0 and a NaN that a mask
    multiplying it by 0 keeps (JAX)."""
    squares = ops.sum(ops.square(vectors), axis=-1, keepdims=True)
    return vectors / ops.sqrt(ops.maximum(squares, 1e-24))


@keras.saving.register_keras_serializable(package="bertlayers")
class UnitLength(keras.layers.Layer):
    """`unit_length` of its input in float32, in the layer's compute dtype; no weights.

    Call args:
      vectors: `[batch, dimension]`.
    """

    def call(self, vectors):
        return ops.cast(unit_length(ops.cast(vectors, "float32")), self.compute_dtype)

    def compute_output_shape(self, vectors_shape):
        return vectors_shape
