"""A classification head over one encoder output: what sentence and token classifiers share."""

import dataclasses

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.sequence_pooling import POOLING_MODES, SequencePooling
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs
from bertlayers.models.feature_based import feature_based_features

POOLINGS = ("pooler",) + POOLING_MODES


@dataclasses.dataclass(frozen=True)
class HeadInput:
    """What a classification head reads of the encoder: one value, checked when made.

    `per_token`: a head per token (`[B, S, H]`), else one vector a sequence (`[B, H]`), read as
    `pooling` says: "pooler" (the encoder's `pooled_output`, tanh(W · [CLS]), as BERT fine-tunes)
    or a `SequencePooling` mode over the sequence output: "mean" of the real tokens (what
    sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained to produce; their
    pooler never was), "first" ([CLS] without the pooler's dense + tanh) or "max".

    With `feature_based` the encoder is frozen and the head reads a BiLSTM of `lstm_units` over a
    scalar mix of all the encoder's hidden states instead (ELMo style, see
    `bertlayers.models.feature_based`): per token, or its final states for a sentence.
    """

    per_token: bool
    pooling: str = "pooler"
    feature_based: bool = False
    lstm_units: int = 256
    pad_id: int | None = None  # with pooling "last": a token id never read (SequencePooling's skip_token_id)

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}; got {self.pooling!r}.")
        if self.pooling != "pooler" and (self.per_token or self.feature_based):
            raise ValueError(
                f"pooling={self.pooling!r} pools the sequence for a sentence-level head; a per-token head "
                "or feature_based=True (a BiLSTM's final states) reads no pooled vector."
            )
        if self.pad_id is not None and self.pooling != "last":
            raise ValueError(
                f"pad_id={self.pad_id} names the token the last-token pooling passes over; pooling is {self.pooling!r}."
            )

    @property
    def reads_pooled_output(self) -> bool:
        """Whether the head reads the encoder's pooler (which then trains)."""
        return not self.per_token and not self.feature_based and self.pooling == "pooler"

    def features(self, encoder: keras.Model, inputs: dict) -> keras.KerasTensor:
        """What the head reads: `[B, S, H]` per token, `[B, H]` a sequence."""
        if self.feature_based:
            return feature_based_features(encoder, inputs, self.lstm_units, return_sequences=self.per_token)
        if self.per_token:
            return encoder(inputs)["sequence_output"]  # [B, S, H]
        if self.pooling == "pooler":
            return encoder(inputs)["pooled_output"]  # [B, H]
        sequence = encoder(inputs)["sequence_output"]  # [B, S, H]
        pool = SequencePooling(
            self.pooling, skip_token_id=self.pad_id, dtype=encoder.layer_dtype_policy, name="pooling"
        )
        if self.pad_id is None:
            return pool(sequence, inputs["padding_mask"])
        return pool(sequence, inputs["padding_mask"], token_ids=inputs["token_ids"])


class LogitsModel(EncoderModel):
    """`logits = head(features)` with `num_classes` classes and dropout, where the subclass says
    what the head reads (`head_input`, a `HeadInput`) and which head it is (`head_class`, taking
    num_classes, dropout, kernel_initializer, and the subclass's `head_options`).

    A `decoder` layer, called on the logits and the padding mask, adds its result as the output
    `tags` (`TokenClassifier(crf=True)`'s Viterbi path).
    """

    POOLINGS = POOLINGS

    def __init__(
        self,
        encoder: keras.Model,
        num_classes: int,
        head_class: type,
        head_input: HeadInput,
        dropout: float = 0.1,
        decoder: keras.layers.Layer | None = None,
        head_options: dict | None = None,
        name: str | None = None,
        trainable: bool = True,
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        # The head first: its initializer draws the global seed before any feature layer's does.
        head = head_class(
            num_classes,
            dropout=dropout,
            kernel_initializer=bert_initializer(encoder.config.initializer_range),
            dtype=encoder.layer_dtype_policy,
            name="head",
            **(head_options or {}),
        )
        outputs = {"logits": head(head_input.features(encoder, inputs))}
        if decoder is not None:  # a layer reading the logits and the padding mask: a tagger's CRF
            outputs["tags"] = decoder(outputs["logits"], inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.head_input = head_input
        self.uses_pooled_output = head_input.reads_pooled_output
        self.pooling = head_input.pooling
        self.feature_based = head_input.feature_based
        self.lstm_units = head_input.lstm_units
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
