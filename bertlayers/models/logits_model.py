"""A classification head over one encoder output: what sentence and token classifiers share."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.sequence_pooling import POOLING_MODES, SequencePooling
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs
from bertlayers.models.feature_based import feature_based_features


class LogitsModel(EncoderModel):
    """`logits = head(features)` with `num_classes` classes and dropout, where the subclass says
    what the head reads (`reads`) and which head it is (`head_class`, taking num_classes, dropout,
    kernel_initializer).

    `reads` is "sequence" (a head per token) or "sentence" (one vector a sequence). A sentence is
    read as `pooling` says: "pooler" (the encoder's `pooled_output`, tanh(W · [CLS]), as BERT
    fine-tunes) or a `SequencePooling` mode over the sequence output: "mean" of the real tokens
    (what sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained to produce;
    their pooler never was), "first" ([CLS] without the pooler's dense + tanh) or "max".

    With `feature_based=True` the encoder is frozen and the head reads a BiLSTM of `lstm_units`
    over a scalar mix of all the encoder's hidden states instead (ELMo style, see
    `bertlayers.models.feature_based`): per token, or its final states for a sentence.

    A `decoder` layer, called on the logits and the padding mask, adds its result as the output
    `tags` (`TokenClassifier(crf=True)`'s Viterbi path).
    """

    POOLINGS = ("pooler",) + POOLING_MODES
    READS = ("sequence", "sentence")

    def __init__(
        self,
        encoder: keras.Model,
        num_classes: int,
        head_class: type,
        reads: str,
        dropout: float = 0.1,
        feature_based: bool = False,
        lstm_units: int = 256,
        decoder: keras.layers.Layer | None = None,
        pooling: str = "pooler",
        name: str | None = None,
        trainable: bool = True,
        **kwargs,
    ) -> None:
        if reads not in self.READS:
            raise ValueError(f"reads must be one of {', '.join(self.READS)}; got {reads!r}.")
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(self.POOLINGS)}; got {pooling!r}.")
        if pooling != "pooler" and (reads != "sentence" or feature_based):
            raise ValueError(
                f"pooling={pooling!r} pools the sequence for a sentence-level head; a per-token head "
                "or feature_based=True (a BiLSTM's final states) reads no pooled vector."
            )
        inputs = encoder_inputs()
        # The head first: its initializer draws the global seed before any feature layer's does.
        head = head_class(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="head",
        )
        features = _features(encoder, inputs, reads, pooling, feature_based, lstm_units)
        outputs = {"logits": head(features)}
        if decoder is not None:  # a layer reading the logits and the padding mask: a tagger's CRF
            outputs["tags"] = decoder(outputs["logits"], inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.uses_pooled_output = reads == "sentence" and not feature_based and pooling == "pooler"
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


def _features(encoder, inputs, reads, pooling, feature_based, lstm_units):
    """What the head reads: `[B, S, H]` per token, `[B, H]` a sentence (see `LogitsModel`)."""
    if feature_based:
        return feature_based_features(encoder, inputs, lstm_units, return_sequences=reads == "sequence")
    if reads == "sequence":
        return encoder(inputs)["sequence_output"]  # [B, S, H]
    if pooling == "pooler":
        return encoder(inputs)["pooled_output"]  # [B, H]
    sequence = encoder(inputs)["sequence_output"]  # [B, S, H]
    return SequencePooling(pooling, dtype=encoder.layer_dtype_policy, name="pooling")(sequence, inputs["padding_mask"])
