"""A classification head over one encoder output: what sentence and token classifiers share."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


class LogitsModel(EncoderModel):
    """`logits = head(encoder(inputs)[encoder_output])` with `num_classes` classes and dropout.

    Subclasses name the encoder output they classify (`encoder_output`) and the head layer
    class (`head_class`, taking num_classes, dropout, kernel_initializer).
    """

    encoder_output = None
    head_class = None

    def __init__(self, encoder, num_classes, dropout=0.1, name=None, trainable=True, **kwargs):
        inputs = encoder_inputs()
        head = self.head_class(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="head",
        )
        outputs = {"logits": head(encoder(inputs)[self.encoder_output])}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.uses_pooled_output = self.encoder_output == "pooled_output"
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)

    def _constructor_args(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout}

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
