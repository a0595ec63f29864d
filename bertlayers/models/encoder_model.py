"""The base of every model built on an encoder: heads over its outputs, a config that
rebuilds them over the deserialized encoder, and default losses per head."""

import inspect

import keras
from keras import ops

from bertlayers import backend
from bertlayers.networks.encoder_base import INPUT_NAMES
from bertlayers.networks.guarded_model import GuardedModel


class _PerExample(keras.losses.Loss):
    """Per-example losses computed by a model, reduced as Keras reduces its own losses (the mean
    over the batch, scaled for the replicas of a distribution strategy)."""

    def call(self, y_true, y_pred):
        return y_pred


_PER_EXAMPLE = _PerExample(name="per_example")


# The input prefixes of a model reading queries and documents side by side (sparse and multi-vector
# training): `query_token_ids`, `document_padding_mask`, ...
QUERY, DOCUMENT = "query_", "document_"


def encoder_inputs():
    """keras.Input for each encoder input: int32 `[batch, seq]`."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}


class EncoderModel(GuardedModel, keras.Model):
    """A functional model over `self.encoder`.

    Subclasses build their graph in `__init__`, call `super().__init__(inputs, outputs)`, set
    `self.encoder`, and list their constructor arguments in `_constructor_args`. `from_config`
    deserializes the encoder and calls the constructor again, so heads tied to the encoder's
    variables are tied again after loading.
    """

    def __init__(self, inputs: dict, outputs: dict, name: str | None = None, trainable: bool = True, **kwargs) -> None:
        # Keras's functional models drop the keywords they do not know: a misspelt or misplaced
        # setting (a tagger given `pooling`) would build another model than the one asked for.
        if kwargs:
            known = [p for p in inspect.signature(type(self).__init__).parameters if p not in ("self", "kwargs")]
            raise TypeError(
                f"{type(self).__name__} got {', '.join(sorted(kwargs))}: not among its arguments ({', '.join(known)})."
            )
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable)

    # Whether a head reads the encoder's `pooled_output`. Models that do not leave the pooler
    # out of training: it gets no gradient, and Keras would warn about it on every fit.
    uses_pooled_output = True

    @property
    def trainable_weights(self):
        weights = super().trainable_weights
        unused = {id(w) for layer in self.unused_layers() for w in layer.weights}
        return [w for w in weights if id(w) not in unused] if unused else weights

    @property
    def trainable_variables(self):
        # Keras builds optimizers from this one and trains from trainable_weights: keep them equal.
        return self.trainable_weights

    def unused_layers(self):
        """Layers that get no gradient: an encoder's pooler where no head reads it, and the
        whole encoder where it is a frozen feature extractor (`feature_based`)."""
        encoder = getattr(self, "encoder", None)
        if encoder is None:
            return []
        if getattr(self, "feature_based", False):
            return [encoder]
        unused = list(encoder.layers_outside_graph())
        if not self.uses_pooled_output:
            unused.append(encoder.pooler)
        return unused

    def _constructor_args(self):
        return {}

    def encoders_by_input_prefix(self):
        """{prefix: encoder}: the encoder that reads the inputs named `prefix + token_ids` etc."""
        return {"": self.encoder}

    def input_value_limits(self):
        return [
            limit._replace(prefix=prefix)
            for prefix, encoder in self.encoders_by_input_prefix().items()
            for limit in encoder.input_value_limits()
        ]

    def reduced_loss(self, per_example):
        """The training loss of float32 `[B]` per-example losses a model computes itself (in its
        `compute_loss`): their mean as Keras takes it, plus the losses its layers added."""
        loss = _PER_EXAMPLE(ops.zeros_like(per_example), per_example)
        for extra in self.losses:
            loss = loss + backend.additional_loss(self, extra)
        return loss

    def finished_encoder(self):
        """The encoder fine-tuning starts from, standing alone (what a pretraining run saves as
        encoder.keras): `self.encoder`, unless its weights are defined through another part of
        this model (DeBERTa-v3's discriminator, whose token table is the generator's plus a
        difference)."""
        return self.encoder

    def logits_outputs(self) -> list[str]:
        """The outputs that are logits over their last axis (classes, tags, answer positions or
        choices), what an ensemble averages as probabilities: `logits` and every `*_logits`."""
        outputs = self.output if isinstance(self.output, dict) else {}
        return [name for name in outputs if name == "logits" or name.endswith("_logits")]

    def serving_model(self):
        """The model `export_for_serving` serves for this one: itself, unless the task is served
        through a part of it (a multiple-choice model's pair scorer, a dual encoder's embedder)."""
        return self

    def default_losses(self):
        """{output name: loss} used when `compile` gets no loss."""
        raise NotImplementedError

    def default_metrics(self):
        """{output name: [metrics]} used when `compile` gets no metrics (weighted by sample weights)."""
        return {}

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """`keras.Model.compile` with the heads' losses and metrics filled in by default."""
        if loss is None:
            loss = self.default_losses()
        if metrics is None and weighted_metrics is None:
            weighted_metrics = self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)

    def compile_from_config(self, config):
        """Recompile a loaded model as it was saved (Keras skips, with a warning, any model whose
        `compile` is overridden, as this one's is to fill in the heads' losses)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
            **self._constructor_args(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
