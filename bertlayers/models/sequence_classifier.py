"""Sequence classification and regression (single sentences and sentence pairs)."""

import keras

from bertlayers.layers.classification_head import ClassificationHead
from bertlayers.models.logits_model import LogitsModel


@keras.saving.register_keras_serializable(package="bertlayers")
class SequenceClassifier(LogitsModel):
    """BERT fine-tuning for classification: logits = W · Dropout(pooled_output) + b.

    Inputs: the encoder's. Output `logits`: float32 `[batch, num_classes]`, or `[batch, 1]`
    scores for regression (`num_classes=1`, trained with mean squared error).

    Args:
      encoder: a `BertEncoder` or `AlbertEncoder` (pretrained, typically).
      num_classes: number of labels; 1 for regression.
      dropout: dropout before the output layer (0.1 in BERT).
    """

    encoder_output = "pooled_output"
    head_class = ClassificationHead

    def __init__(self, encoder, num_classes, dropout=0.1, name="sequence_classifier", **kwargs):
        super().__init__(encoder, num_classes, dropout=dropout, name=name, **kwargs)

    def default_losses(self):
        if self.num_classes == 1:
            return {"logits": keras.losses.MeanSquaredError()}
        return super().default_losses()

    def default_metrics(self):
        return {} if self.num_classes == 1 else super().default_metrics()
