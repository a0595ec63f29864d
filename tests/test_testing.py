"""`bertlayers.testing`: the shared checks pass on the library's encoders and task models, and fail
on what they are there to catch."""

import keras
import numpy as np
import pytest

from bertlayers.families.albert import AlbertEncoder
from bertlayers.families.bert import BertEncoder
from bertlayers.families.xlnet import XLNetEncoder
from bertlayers.models import SequenceClassifier
from bertlayers.testing import (
    check_served_equals_keras,
    encoder_batch,
    run_encoder_test,
    run_layer_test,
    run_task_model_test,
)

TINY = dict(
    vocabulary_size=60,
    num_layers=2,
    hidden_size=16,
    num_heads=2,
    intermediate_size=24,
    max_sequence_length=16,
    dropout=0.0,
    attention_dropout=0.0,
)


@pytest.mark.other_backend_cases("bert", "xlnet", "rotary_local_global")  # ALBERT: BERT's block, shared
@pytest.mark.parametrize(
    "encoder_class, extra",
    [
        (BertEncoder, {}),
        pytest.param(  # BERT's block, shared: the bert case covers the check's parts in the fast tier
            AlbertEncoder,
            {"embedding_size": 8, "num_layers": 3, "num_layer_groups": 1},
            marks=pytest.mark.slow(reason="the encoder check on a third family, 9 s"),
        ),
        pytest.param(
            XLNetEncoder,
            {},
            marks=pytest.mark.slow(
                reason="the check's path is the bert and rotary cases'; XLNet's own is test_xlnet's"
            ),
        ),
        # Per-layer settings: a sliding window on the second layer, RMSNorm, GeGLU, no biases, pre-norm
        # (marked slow: the next case covers these parts in the fast tier).
        pytest.param(
            BertEncoder,
            {
                "normalization": "rms_norm",
                "feed_forward": "gated",
                "use_bias": False,
                "norm_first": True,
                "layer_types": ("full", "local"),
                "layer_kinds": {"full": {}, "local": {"attention_window": 2}},
            },
            marks=pytest.mark.slow(reason="the encoder check with every per-layer setting, 10 s"),
        ),
        # ModernBERT's pattern from the built-in parts: rotary attention (a base per layer kind), a
        # sliding window on the local layers, RMSNorm, GeGLU, no biases, pre-norm.
        (
            BertEncoder,
            {
                "type_vocab_size": 0,
                "attention": "rotary",
                "rotary_theta": 160000.0,
                "normalization": "rms_norm",
                "feed_forward": "gated",
                "use_bias": False,
                "norm_first": True,
                "num_layers": 3,
                "layer_types": ("global", "local", "local"),
                "layer_kinds": {"global": {}, "local": {"attention_window": 4, "rotary_theta": 10000.0}},
            },
        ),
    ],
    ids=["bert", "albert", "xlnet", "per_layer_settings", "rotary_local_global"],
)
def test_the_encoder_check_passes_on_the_library_encoders(encoder_class, extra):
    encoder, outputs = run_encoder_test(encoder_class, {**TINY, **extra})
    assert len(outputs["encoder_outputs"]) == encoder.config.num_layers


def test_the_encoder_check_catches_an_encoder_that_reads_padding():
    class ReadsPadding(BertEncoder):  # sees every position: padding leaks into the real tokens
        def call(self, inputs, training=None, mask=None):
            return super().call(
                {**inputs, "padding_mask": keras.ops.ones_like(inputs["padding_mask"])}, training=training, mask=mask
            )

    with pytest.raises(AssertionError, match="more padding changed the real tokens' outputs"):
        run_encoder_test(ReadsPadding, TINY)


def test_the_layer_check_catches_a_config_without_an_argument():
    @keras.saving.register_keras_serializable(package="bertlayers_tests")
    class Forgetful(keras.layers.Layer):
        def __init__(self, scale=2.0, **kwargs):
            super().__init__(**kwargs)
            self.scale = scale

        def call(self, inputs):
            return inputs * self.scale

        def get_config(self):  # forgets its argument (Keras's own config would have recorded it)
            config = super().get_config()
            config.pop("scale", None)
            return config

    with pytest.raises(AssertionError, match=r"get_config lacks constructor arguments \['scale'\]"):
        run_layer_test(Forgetful, {"scale": 3.0}, {"inputs": np.ones((2, 3), "float32")}, (2, 3), trainable=False)


@pytest.mark.slow
def test_the_task_model_check_trains_and_reloads_a_classifier():
    model = SequenceClassifier(BertEncoder(**TINY), 3, dropout=0.0)
    batch = encoder_batch(60)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    predictions = run_task_model_test(model, batch, np.array([0, 1, 2]))
    assert np.asarray(predictions["logits"] if isinstance(predictions, dict) else predictions).shape == (3, 3)


@pytest.mark.tensorflow_only
def test_the_served_check_compares_the_savedmodel_with_keras():
    model = SequenceClassifier(BertEncoder(**TINY), 3, dropout=0.0)
    served = check_served_equals_keras(model, encoder_batch(60), sequence_length=16)
    assert served["logits"].shape == (3, 3) and "probabilities" in served
