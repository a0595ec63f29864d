"""SQuAD-style span head: a start and an end logit per token."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.masking import mask_logits


@keras.saving.register_keras_serializable(package="bertlayers")
class SpanPredictionHead(keras.layers.Layer):
    """start_logits, end_logits = split(W · sequence + b), W `[H, 2]`.

    Positions outside `span_mask` (the question, [CLS]/[SEP], padding) get a large negative
    logit, so neither a softmax nor an argmax can pick them.

    Args:
      kernel_initializer: initializer of `W`.

    Call args:
      sequence: `[batch, seq, H]`.
      span_mask: `[batch, seq]`, nonzero where an answer may start or end; None allows all.

    Returns:
      `(start_logits, end_logits)`, each float32 `[batch, seq]`.
    """

    def __init__(self, kernel_initializer: str | keras.initializers.Initializer | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())

    def build(self, sequence_shape, span_mask_shape=None):
        self.dense = keras.layers.Dense(
            2, kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy, name="logits"
        )
        self.dense.build(sequence_shape)
        self.built = True

    def call(self, sequence, span_mask=None):
        logits = ops.cast(self.dense(sequence), "float32")
        start_logits, end_logits = logits[..., 0], logits[..., 1]
        if span_mask is not None:
            start_logits = mask_logits(start_logits, span_mask)
            end_logits = mask_logits(end_logits, span_mask)
        return start_logits, end_logits

    def compute_output_spec(self, sequence, span_mask=None):
        spec = keras.KerasTensor(tuple(sequence.shape[:-1]), dtype="float32")
        return spec, keras.KerasTensor(tuple(sequence.shape[:-1]), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        return config
