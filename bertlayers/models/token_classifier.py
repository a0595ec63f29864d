"""Token classification (named entities, tagging)."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class TokenClassifier(EncoderModel):
    """logits = W · Dropout(sequence_output) + b for every token.

    Inputs: the encoder's. Output `logits`: float32 `[batch, seq, num_classes]`. Train with
    sample weights that are 1 on the tokens that carry a label (the first WordPiece of each
    word, as in BERT's NER) and 0 elsewhere.
    """

    def __init__(self, encoder, num_classes, dropout=0.1, name="token_classifier", trainable=True, **kwargs):
        inputs = encoder_inputs()
        head = TokenClassificationHead(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="token_head",
        )
        outputs = {"logits": head(encoder(inputs)["sequence_output"])}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)

    def _constructor_args(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout}

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
