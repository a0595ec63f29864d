"""An ensemble of fine-tuned models: several models of one task answering as one, by the mean of
their probabilities (the T5 study's ensembling of fine-tuned checkpoints; random restarts keep the
best model, an ensemble keeps them all).

For each logits output (`logits`, or `start_logits` and `end_logits` of a span predictor), over its
last axis (classes, tags, answer positions or choices):

    p(c | x) = (1/N) Σ_i softmax(logits_i(x))_c          [..., C]
    logits   = log p(c | x)                               softmax(logits) = p again
"""

import keras

from bertlayers.layers.mean_probabilities import MeanProbabilities
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class ClassifierEnsemble(EncoderModel):
    """N fine-tuned models of one task answering by their mean probabilities (`MeanProbabilities`,
    over each output its members' `logits_outputs()` name, its last axis): `SequenceClassifier`s,
    softmax `TokenClassifier`s (per token), `SpanPredictor`s (answer starts and ends, each a softmax
    over the tokens), `MultipleChoice` models (a softmax over the choices) or `MultiTask` models
    (every task's head); or any library task models with the same such outputs over the same inputs.

    Inputs: the members' (the encoder's three; a span predictor's `span_mask` too; a multiple-choice
    model's `[B, C, S]`). Outputs: each logits output of the members, float32, the log of their mean
    probabilities (served as the members are: `probabilities` the mean and `label` its argmax for a
    classifier, `tags` for a tagger, the best span for a span predictor, every head of a multi-task
    model; a multiple-choice ensemble serves each member's pair score, see `serving_model`).
    The members are trained before (`finetune_restarts(..., ensemble=N)`); the ensemble itself is
    not trainable. `label_names` are the members' (which must agree).
    """

    uses_pooled_output = False

    def __init__(
        self, members: list[keras.Model | dict], name: str = "classifier_ensemble", trainable: bool = False, **kwargs
    ) -> None:
        members = [keras.saving.deserialize_keras_object(m) if isinstance(m, dict) else m for m in members]
        if len(members) < 2:
            raise ValueError(f"ClassifierEnsemble averages at least 2 members, got {len(members)}.")
        strangers = [type(m).__name__ for m in members if not isinstance(m, EncoderModel)]
        if strangers:
            raise ValueError(
                f"ClassifierEnsemble averages the library's task models (an EncoderModel names its logits outputs); "
                f"got {strangers}."
            )
        if any(getattr(m, "crf", None) is not None for m in members):
            raise ValueError(
                "ClassifierEnsemble: a CRF tagger answers with its best tag path, not per-token probabilities; "
                "their mean would not be any member's answer (ensemble softmax taggers)."
            )
        _check_alike(members)
        if len({member.name for member in members}) < len(members):
            members = [_renamed(member, f"member_{k}") for k, member in enumerate(members)]
        inputs = {
            name: keras.Input(shape=tensor.shape[1:], dtype=tensor.dtype, name=name)
            for name, tensor in members[0].input.items()
        }
        answers = [member(inputs) for member in members]
        outputs = {
            name: MeanProbabilities(name=f"mean_{name}")([answer[name] for answer in answers])  # N x [..., C]
            for name in members[0].logits_outputs()
        }
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.members = members
        self.encoder = members[0].encoder  # input checks: every member reads the same inputs
        self.label_names = getattr(members[0], "label_names", None)
        self.tasks = getattr(members[0], "tasks", None)  # a multi-task ensemble is served head by head

    def logits_outputs(self):
        return list(self.output)  # each the log of the members' mean probabilities

    def serving_model(self):
        """The ensemble itself; or, where the members are served through a part (a `MultipleChoice`'s
        pair scorer: one (context, choice) pair a row), a model over that part's inputs whose
        `member_scores` `[B, N]` are each member's score of the pair. A question's probabilities
        need all its choices at once, which a served row does not see: the client takes, for each
        member, the softmax of its scores over the question's choices, and averages them (what the
        Keras ensemble answers)."""
        parts = [member.serving_model() for member in self.members]
        if all(part is member for part, member in zip(parts, self.members)):
            return self
        if any("logits" not in part.output for part in parts):
            raise ValueError(
                "An ensemble whose members are served as embedders (multiple choice with the similarity scorer) "
                "is not served as one model yet: export each member (`model.members[k]`) on its own."
            )
        parts = [_renamed(part, f"member_{k}_{part.name}") for k, part in enumerate(parts)]
        inputs = encoder_inputs()
        scores = keras.layers.Concatenate(name="member_scores")([part(inputs)["logits"] for part in parts])  # [B, N]
        return keras.Model(inputs, {"member_scores": scores}, name=f"{self.name}_pair_scores")

    def default_losses(self):
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for name in self.output}

    def unused_layers(self):
        return []

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "members": [keras.saving.serialize_keras_object(member) for member in self.members],
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _check_alike(members):
    """A ValueError unless every member takes the same inputs and has the same logits outputs,
    classes and label names."""

    def signature(member):  # every EncoderModel takes and gives dicts
        return (
            tuple(sorted((name, tuple(tensor.shape[1:])) for name, tensor in member.input.items())),
            tuple((name, member.output[name].shape[-1]) for name in member.logits_outputs()),
            tuple(getattr(member, "label_names", None) or ()),
        )

    signatures = {signature(member) for member in members}
    _, averaged, _ = signature(members[0])
    if len(signatures) > 1 or not averaged:
        raise ValueError(
            "ClassifierEnsemble: every member must take the same named inputs and have the same `logits` (or "
            "`*_logits`) outputs, classes and label_names; got (inputs, logits outputs and classes, label names) "
            f"{sorted(map(str, signatures))}."
        )


def _renamed(model, name):
    """A copy of `model` (its config and weights) named `name`: a functional model's parts need
    names of their own, and the runners' members all share their class's default name."""
    copy = type(model).from_config({**model.get_config(), "name": name})
    copy.set_weights(model.get_weights())
    return copy
