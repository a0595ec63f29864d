"""Extractive question answering (SQuAD): a start and an end logit per token."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.span_prediction_head import SpanPredictionHead
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class SpanPredictor(EncoderModel):
    """start_logits, end_logits = split(W · sequence_output + b), masked outside `span_mask`.

    Inputs: the encoder's, and `span_mask` int32 `[batch, seq]` (1 where an answer may start or
    end: the context's tokens and, for SQuAD v2.0, [CLS] for "no answer").
    Outputs: `start_logits`, `end_logits`, float32 `[batch, seq]`. The loss is the mean of the
    two cross-entropies, as in BERT.
    """

    uses_pooled_output = False

    def __init__(self, encoder: keras.Model, name: str = "span_predictor", trainable: bool = True, **kwargs) -> None:
        inputs = encoder_inputs()
        inputs["span_mask"] = keras.Input(shape=(None,), dtype="int32", name="span_mask")
        head = SpanPredictionHead(
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="span_head",
        )
        sequence = encoder({name: inputs[name] for name in ("token_ids", "segment_ids", "padding_mask")})
        start_logits, end_logits = head(sequence["sequence_output"], inputs["span_mask"])
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.head = head

    def default_losses(self):
        return {
            name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            for name in ("start_logits", "end_logits")
        }

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        kwargs.setdefault("loss_weights", {"start_logits": 0.5, "end_logits": 0.5})
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)
