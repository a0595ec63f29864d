"""A family lives in one folder: its names stay reachable from the public namespaces, its
registrations happen on import, and `.keras` files saved before the move still load."""

import importlib
import os

import keras
import numpy as np
import pytest

import bertlayers.convert
import bertlayers.layers
import bertlayers.networks
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES, encoder_config_from_huggingface
from bertlayers.families.recipes import recipe_names
from bertlayers.networks import ENCODERS, preset_names

SAVED = os.path.join(os.path.dirname(__file__), "fixtures", "saved_before_family_folders")


@pytest.mark.parametrize("namespace", [bertlayers.layers, bertlayers.networks, bertlayers.convert])
def test_forwarded_names_resolve_to_the_family_objects(namespace):
    for name, module in namespace.FROM_FAMILIES.items():
        assert getattr(namespace, name) is getattr(importlib.import_module(module), name)
        assert name in dir(namespace)
        assert name in namespace.__all__
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchLayer'"):
        namespace.NoSuchLayer


def test_importing_the_families_registers_them():
    assert {"electra", "spanbert", "xlnet"} <= set(recipe_names())
    assert {"bert", "electra", "xlnet"} <= set(HUGGINGFACE_FAMILIES)
    assert "xlnet" in ENCODERS and {"xlnet_base", "xlnet_large"} <= set(preset_names())


def test_an_unknown_model_type_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"model_type 'gpt2' is not supported; supported: bert, electra, xlnet"):
        encoder_config_from_huggingface({"model_type": "gpt2"})


@pytest.mark.parametrize("family", ["electra", "spanbert", "xlnet"])
def test_models_saved_before_the_move_load_and_give_the_same_outputs(family):
    # Written by tests/fixtures/record_saved_families.py with the layers in bertlayers.layers.
    model = keras.saving.load_model(os.path.join(SAVED, f"{family}.keras"))
    recorded = np.load(os.path.join(SAVED, f"{family}.npz"))
    batch = {key[len("input/"):]: recorded[key] for key in recorded.files if key.startswith("input/")}
    outputs = model(batch, training=False)
    for key in recorded.files:
        if key.startswith("output/"):
            np.testing.assert_allclose(np.asarray(outputs[key[len("output/"):]]), recorded[key], atol=1e-6, err_msg=key)
