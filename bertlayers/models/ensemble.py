"""An ensemble of classifiers: several fine-tuned models answering as one, by the mean of their
class probabilities (the T5 study's ensembling of fine-tuned checkpoints; random restarts keep the
best model, an ensemble keeps them all).

    p(c | x) = (1/N) Σ_i softmax(logits_i(x))_c          [B, C]
    logits   = log p(c | x)                               softmax(logits) = p again
"""

import keras

from bertlayers.layers.mean_probabilities import MeanProbabilities
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs


@keras.saving.register_keras_serializable(package="bertlayers")
class ClassifierEnsemble(EncoderModel):
    """N `SequenceClassifier`s, or N softmax `TokenClassifier`s (or any models with a `logits` output
    of one shape over the encoder's inputs), answering by their mean probabilities
    (`MeanProbabilities`, over the last axis: per token for taggers).

    Inputs: the encoder's three. Output: `logits` float32 `[B, C]` (`[B, S, C]` for taggers), the
    log of the mean probabilities (served as a classifier: `probabilities` are the mean, `label` its
    argmax; or as a tagger: `tags` each token's argmax).
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
        if any(getattr(m, "crf", None) is not None for m in members):
            raise ValueError(
                "ClassifierEnsemble: a CRF tagger answers with its best tag path, not per-token probabilities; "
                "their mean would not be any member's answer (ensemble softmax taggers)."
            )
        names = {tuple(getattr(m, "label_names", None) or ()) for m in members}
        classes = {m.output["logits"].shape[-1] if isinstance(m.output, dict) else None for m in members}
        if len(names) > 1 or len(classes) > 1 or None in classes:
            raise ValueError(
                "ClassifierEnsemble: every member must have a `logits` output of the same classes and the same "
                f"label_names; got classes {sorted(map(str, classes))} and label names {sorted(names)}."
            )
        if len({member.name for member in members}) < len(members):
            members = [_renamed(member, f"member_{k}") for k, member in enumerate(members)]
        inputs = encoder_inputs()
        logits = [member(inputs)["logits"] for member in members]  # N x [B, C]
        outputs = {"logits": MeanProbabilities(name="mean_probabilities")(logits)}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.members = members
        self.encoder = members[0].encoder  # input checks: every member reads the same inputs
        self.label_names = getattr(members[0], "label_names", None)

    def default_losses(self):
        return {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}

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


def _renamed(model, name):
    """A copy of `model` (its config and weights) named `name`: a functional model's parts need
    names of their own, and the runners' members all share their class's default name."""
    copy = type(model).from_config({**model.get_config(), "name": name})
    copy.set_weights(model.get_weights())
    return copy
