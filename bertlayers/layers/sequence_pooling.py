"""One vector per sequence from its token states: the mean over real tokens, the first token, or
the maximum over real tokens, optionally L2-normalized (sentence embeddings for retrieval)."""

import keras
from keras import ops

POOLING_MODES = ("mean", "first", "max")


@keras.saving.register_keras_serializable(package="bertlayers")
class SequencePooling(keras.layers.Layer):
    """pooled = mean / first / max of `sequence` over the real tokens; no weights.

    Sentence-transformers' models (all-MiniLM-L6-v2 among them) are trained with "mean";
    "first" reads [CLS] as it is, without `Pooler`'s dense + tanh.

    Args:
      mode: "mean" (over real tokens), "first" (position 0) or "max" (over real tokens).
      normalize: divide each pooled vector by its L2 norm (cosine similarity is then a dot product).

    Call args:
      sequence: `[batch, seq, H]`.
      padding_mask: `[batch, seq]`, nonzero at real tokens (default: every position is real).

    Returns:
      `[batch, H]`, in the layer's compute dtype (sums taken in float32).
    """

    def __init__(self, mode: str = "mean", normalize: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise ValueError(f"SequencePooling mode must be one of {POOLING_MODES}, got {mode!r}.")
        self.mode = mode
        self.normalize = bool(normalize)

    def build(self, sequence_shape, padding_mask_shape=None):
        self.built = True

    def call(self, sequence, padding_mask=None):
        values = ops.cast(sequence, "float32")  # [batch, seq, H]
        if padding_mask is None:
            real = ops.ones_like(values[:, :, :1])
        else:
            real = ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), "float32"), -1)  # [batch, seq, 1]
        if self.mode == "first":
            pooled = values[:, 0, :]
        elif self.mode == "mean":
            pooled = ops.sum(values * real, axis=1) / ops.maximum(ops.sum(real, axis=1), 1.0)
        else:
            # Padding can never win: it is pushed far below any real state.
            pooled = ops.max(values * real - (1.0 - real) * 1e30, axis=1)
        if self.normalize:
            pooled = pooled / ops.maximum(ops.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return ops.cast(pooled, self.compute_dtype)  # [batch, H]

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return (sequence_shape[0], sequence_shape[-1])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "normalize": self.normalize}
