"""A classification head over one encoder output: what sentence and token classifiers share."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.sequence_pooling import POOLING_MODES, SequencePooling
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs
from bertlayers.models.feature_based import feature_based_features


class LogitsModel(EncoderModel):
    """`logits = head(encoder(inputs)[encoder_output])` with `num_classes` classes and dropout.

    With `feature_based=True` the encoder is frozen and the head reads a BiLSTM of
    `lstm_units` over a scalar mix of all the encoder's hidden states instead (ELMo style,
    see `bertlayers.models.feature_based`): per token where the encoder output read is the
    sequence, the BiLSTM's final states where it is the pooled output.

    `pooling` picks what a sentence-level head reads: "pooler" (the encoder's `pooled_output`,
    tanh(W · [CLS]), as BERT fine-tunes) or a `SequencePooling` mode over the sequence output:
    "mean" of the real tokens (what sentence-transformers checkpoints such as all-MiniLM-L6-v2 were
    trained to produce; their pooler never was), "first" ([CLS] without the pooler's dense + tanh)
    or "max".

    A `decoder` layer, called on the logits and the padding mask, adds its result as the output
    `tags` (`TokenClassifier(crf=True)`'s Viterbi path).

    Subclasses name the encoder output they classify (`encoder_output`) and the head layer
    class (`head_class`, taking num_classes, dropout, kernel_initializer).
    """

    encoder_output = None
    head_class = None
    POOLINGS = ("pooler",) + POOLING_MODES

    def __init__(
        self,
        encoder,
        num_classes,
        dropout=0.1,
        feature_based=False,
        lstm_units=256,
        decoder=None,
        pooling="pooler",
        name=None,
        trainable=True,
        **kwargs,
    ):
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(self.POOLINGS)}; got {pooling!r}.")
        if pooling != "pooler" and (self.encoder_output != "pooled_output" or feature_based):
            raise ValueError(
                f"pooling={pooling!r} pools the sequence for a sentence-level head; a per-token head "
                "or feature_based=True (a BiLSTM's final states) reads no pooled vector."
            )
        inputs = encoder_inputs()
        head = self.head_class(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="head",
        )
        per_token = self.encoder_output == "sequence_output"
        if feature_based:
            features = feature_based_features(encoder, inputs, lstm_units, return_sequences=per_token)
        elif pooling != "pooler":
            sequence = encoder(inputs)["sequence_output"]  # [B, S, H]
            features = SequencePooling(pooling, dtype=encoder.layer_dtype_policy, name="pooling")(
                sequence, inputs["padding_mask"]
            )  # [B, H]
        else:
            features = encoder(inputs)[self.encoder_output]
        outputs = {"logits": head(features)}
        if decoder is not None:  # a layer reading the logits and the padding mask: a tagger's CRF
            outputs["tags"] = decoder(outputs["logits"], inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.uses_pooled_output = not per_token and not feature_based and pooling == "pooler"
        self.pooling = pooling
        self.feature_based = bool(feature_based)
        self.lstm_units = int(lstm_units)
        self.head = head
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)

    def _constructor_args(self):
        return {
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "feature_based": self.feature_based,
            "lstm_units": self.lstm_units,
        }

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
