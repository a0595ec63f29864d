"""Multiple choice (SWAG-style): each (context, choice) pair scored through the encoder, a softmax
over the choices.

Dimensions: B batch, C choices, S sequence.

    [B, C, S] ids --fold--> [B·C, S] --scorer: SequenceClassifier(encoder, 1)--> [B·C, 1] --unfold--> [B, C]

The scorer is a model of its own (`model.scorer`), sharing every weight: it is what serving runs,
one (context, choice) pair per row, and the client takes the best score among a question's
choices (`export_for_serving` exports a `MultipleChoice` so).
"""

import keras
from keras import ops

from bertlayers.models.encoder_model import EncoderModel
from bertlayers.models.sequence_classifier import SequenceClassifier
from bertlayers.networks.encoder_base import INPUT_NAMES


@keras.saving.register_keras_serializable(package="bertlayers")
class FoldChoices(keras.layers.Layer):
    """{name: int `[B, C, S]`} -> {name: int `[B·C, S]`}: every choice a row of its own."""

    def call(self, inputs):
        for name, value in inputs.items():
            if len(value.shape) != 3:
                raise ValueError(f"A multiple-choice {name} is [batch, choices, seq]; got shape {tuple(value.shape)}.")
        return {name: ops.reshape(value, (-1, ops.shape(value)[2])) for name, value in inputs.items()}

    def compute_output_spec(self, inputs):
        return {name: keras.KerasTensor((None, value.shape[2]), dtype=value.dtype) for name, value in inputs.items()}


@keras.saving.register_keras_serializable(package="bertlayers")
class UnfoldChoices(keras.layers.Layer):
    """Scores `[B·C, 1]` -> `[B, C]`, the choices' count read from the ids `[B, C, S]`."""

    def call(self, scores, token_ids):
        return ops.reshape(scores, (-1, ops.shape(token_ids)[1]))

    def compute_output_spec(self, scores, token_ids):
        return keras.KerasTensor((token_ids.shape[0], token_ids.shape[1]), dtype=scores.dtype)


@keras.saving.register_keras_serializable(package="bertlayers")
class MultipleChoice(EncoderModel):
    """logits `[B, C]`: W · Dropout(pooled_output) + b for each (context, choice) pair.

    Inputs: the encoder's, with a choices axis: int `[batch, choices, seq]` (each choice packed as
    a sentence pair after its context: `bertlayers.task_data.multiple_choice.encode_choices`).
    Output `logits`: `[batch, choices]`, trained with a softmax over the choices (the default loss,
    accuracy the default metric).

    Args:
      encoder: a pretrained encoder.
      dropout: dropout before the scoring layer (0.1 in BERT).
      pooling: what the scorer reads of each pair (`SequenceClassifier`'s `pooling`).
    """

    def __init__(
        self,
        encoder: keras.Model,
        dropout: float = 0.1,
        pooling: str = "pooler",
        name: str = "multiple_choice",
        **kwargs,
    ) -> None:
        scorer = SequenceClassifier(encoder, 1, dropout=dropout, pooling=pooling, name="choice_scorer")
        inputs = {name: keras.Input((None, None), dtype="int32", name=name) for name in INPUT_NAMES}  # [B, C, S]
        pairs = FoldChoices(name="fold_choices")(inputs)  # [B·C, S]
        scores = scorer(pairs)["logits"]  # [B·C, 1]
        logits = UnfoldChoices(name="unfold_choices")(scores, inputs["token_ids"])  # [B, C]
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self.encoder = encoder
        self.scorer = scorer
        self.dropout = float(dropout)
        self.pooling = pooling
        self.uses_pooled_output = scorer.uses_pooled_output

    def _constructor_args(self):
        return {"dropout": self.dropout, "pooling": self.pooling}

    def serving_model(self):
        # One (context, choice) pair a row: the client compares a question's choices.
        return self.scorer

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
