"""Multiple choice (SWAG-style): a score for each of a context's choices, a softmax over them.

Dimensions: B batch, C choices, S sequence, H hidden. Two scorers:

    cross:       [B, C, S] pairs --fold--> [B·C, S] --SequenceClassifier(encoder, 1)--> [B·C, 1] --> [B, C]
    similarity:  [B, 1 + C, S] texts --fold--> [B·(1+C), S] --SentenceEmbedder(encoder)--> [B·(1+C), H]
                 --> scale · cos(context, choice) [B, C]

"cross" reads each (context, choice) pair packed as one sentence pair (BERT's recipe);
"similarity" embeds the context and each choice alone and scores their cosine, so that before
any training it answers what the encoder's embeddings answer (a sentence-embedding checkpoint
such as all-MiniLM-L6-v2 is strong there), and fine-tuning starts from that. The part that scores
is a model of its own sharing every weight, what serving runs (`serving_model`): the pair scorer
(one (context, choice) pair a row) or the embedder (one text a row; the client compares).
"""

import keras
from keras import ops

from bertlayers.models.encoder_model import EncoderModel
from bertlayers.models.sentence_embedder import SentenceEmbedder
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
class ChoiceSimilarity(keras.layers.Layer):
    """Unit vectors `[B·(1+C), H]` (each question's context, then its choices) -> logits `[B, C]`:
    `scale` times the cosine of each choice with its context."""

    def __init__(self, scale: float = 20.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, vectors, token_ids):
        rows = ops.reshape(vectors, (-1, ops.shape(token_ids)[1], ops.shape(vectors)[-1]))  # [B, 1 + C, H]
        context, choices = rows[:, :1], rows[:, 1:]
        return self.scale * ops.sum(context * choices, axis=-1)  # [B, C]

    def compute_output_spec(self, vectors, token_ids):
        choices = None if token_ids.shape[1] is None else token_ids.shape[1] - 1
        return keras.KerasTensor((token_ids.shape[0], choices), dtype=vectors.dtype)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


SCORERS = ("cross", "similarity")


@keras.saving.register_keras_serializable(package="bertlayers")
class MultipleChoice(EncoderModel):
    """logits `[B, C]`: a score for each of a context's choices.

    Inputs: the encoder's, with a choices axis: int `[batch, rows, seq]`, packed by
    `bertlayers.task_data.multiple_choice.encode_choices(packer, examples, scorer)`: for "cross"
    each choice after its context as a sentence pair (rows = choices), for "similarity" the
    context alone and then each choice alone (rows = 1 + choices). Output `logits`:
    `[batch, choices]`, trained with a softmax over the choices (the default loss, accuracy the
    default metric).

    Args:
      encoder: a pretrained encoder.
      dropout: "cross": dropout before the scoring layer (0.1 in BERT).
      pooling: what is read of each row: `SequenceClassifier`'s `pooling` for "cross" (the
        pooler by default); "mean", "first" or "max" for "similarity" (the mean by default).
      scorer: "cross" (each pair through the encoder, a dense unit on it) or "similarity" (the
        cosine of the context's and the choice's embeddings, times `similarity_scale`).
      similarity_scale: the cosine's multiplier before the softmax (sentence-transformers' 20).
    """

    def __init__(
        self,
        encoder: keras.Model,
        dropout: float = 0.1,
        pooling: str | None = None,
        scorer: str = "cross",
        similarity_scale: float = 20.0,
        name: str = "multiple_choice",
        **kwargs,
    ) -> None:
        if scorer not in SCORERS:
            raise ValueError(f"scorer must be one of {SCORERS}, got {scorer!r}.")
        inputs = {name: keras.Input((None, None), dtype="int32", name=name) for name in INPUT_NAMES}  # [B, R, S]
        rows = FoldChoices(name="fold_choices")(inputs)  # [B·R, S]
        if scorer == "cross":
            part = SequenceClassifier(encoder, 1, dropout=dropout, pooling=pooling or "pooler", name="choice_scorer")
            scores = part(rows)["logits"]  # [B·C, 1]
            logits = UnfoldChoices(name="unfold_choices")(scores, inputs["token_ids"])  # [B, C]
        else:
            if pooling == "pooler":
                raise ValueError(
                    'The similarity scorer compares sentence embeddings pooled over the tokens: pooling "mean", '
                    '"first" or "max", not the pooler.'
                )
            part = SentenceEmbedder(encoder, pooling=pooling or "mean", name="choice_embedder")
            vectors = part(rows)["embedding"]  # [B·(1+C), H]
            logits = ChoiceSimilarity(similarity_scale, name="choice_similarity")(vectors, inputs["token_ids"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self.encoder = encoder
        self.scorer = part if scorer == "cross" else None
        self.embedder = part if scorer == "similarity" else None
        self.scorer_kind = scorer
        self.dropout = float(dropout)
        self.pooling = part.pooling
        self.similarity_scale = float(similarity_scale)
        self.uses_pooled_output = part.uses_pooled_output

    def _constructor_args(self):
        return {
            "dropout": self.dropout,
            "pooling": self.pooling,
            "scorer": self.scorer_kind,
            "similarity_scale": self.similarity_scale,
        }

    def serving_model(self):
        # One row a request: a (context, choice) pair's score, or a text's embedding (the client
        # compares a question's choices).
        return self.scorer if self.scorer_kind == "cross" else self.embedder

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

    def default_metrics(self):
        return {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
