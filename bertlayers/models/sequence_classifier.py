"""Sequence classification and regression (single sentences and sentence pairs)."""

import keras

from bertlayers.layers.classification_head import ClassificationHead
from bertlayers.layers.initializers import bert_initializer
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class SequenceClassifier(EncoderModel):
    """BERT fine-tuning for classification: logits = W · Dropout(pooled_output) + b.

    Inputs: the encoder's. Output `logits`: float32 `[batch, num_classes]`, or `[batch, 1]`
    scores for regression (`num_classes=1`, trained with mean squared error).

    Args:
      encoder: a `BertEncoder` or `AlbertEncoder` (pretrained, typically).
      num_classes: number of labels; 1 for regression.
      dropout: dropout before the output layer (0.1 in BERT).
    """

    def __init__(self, encoder, num_classes, dropout=0.1, name="sequence_classifier", trainable=True, **kwargs):
        inputs = encoder_inputs()
        head = ClassificationHead(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="classification_head",
        )
        outputs = {"logits": head(encoder(inputs)["pooled_output"])}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)

    def _constructor_args(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout}

    def default_losses(self):
        if self.num_classes == 1:
            return {"logits": keras.losses.MeanSquaredError()}
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        if self.num_classes == 1:
            return {}
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
