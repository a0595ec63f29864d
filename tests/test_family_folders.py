"""A family lives in one folder: its names are imported from there (no lower namespace offers
them), its registrations happen on import, and `.keras` files saved before the move still load."""

import importlib
import os
import re

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


# Every name a family defines, and the lower namespaces where none of them may be offered.
FAMILY_NAMES = {
    "bertlayers.families.albert": ("AlbertEncoder", "load_google_albert", "load_huggingface_albert"),
    "bertlayers.families.bert": ("BertEncoder", "load_google_bert", "load_huggingface_bert"),
    "bertlayers.families.xlnet": ("XLNetEncoder", "MaskEmbedding", "RelativeAttention", "TwoStreamMasks"),
    "bertlayers.families.electra": ("GeneratorCorruption", "ReplacedTokenDetectionHead", "load_huggingface_electra"),
    "bertlayers.families.spanbert": ("SpanBoundaryHead",),
    "bertlayers.families.roberta": ("load_huggingface_roberta",),
    "bertlayers.families.distilbert": ("load_huggingface_distilbert",),
}


@pytest.mark.parametrize("namespace", [bertlayers.layers, bertlayers.networks, bertlayers.convert])
def test_a_lower_namespace_offers_no_familys_name(namespace):
    for module, names in FAMILY_NAMES.items():
        for name in names:
            assert getattr(importlib.import_module(module), name) is not None
            assert not hasattr(namespace, name), (namespace.__name__, name)
    for name in namespace.__all__:  # what a namespace lists, it can import itself
        assert getattr(namespace, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchLayer'"):
        _ = namespace.NoSuchLayer


def test_the_public_face_names_every_family_encoder():
    for name, family in (("AlbertEncoder", "albert"), ("BertEncoder", "bert"), ("XLNetEncoder", "xlnet")):
        assert getattr(bertlayers, name) is getattr(importlib.import_module(f"bertlayers.families.{family}"), name)
    assert set(ENCODERS) >= {"albert", "bert", "xlnet"}


def test_importing_the_families_registers_them():
    assert {"electra", "spanbert", "xlnet"} <= set(recipe_names())
    assert {"albert", "bert", "distilbert", "electra", "roberta", "xlm-roberta", "xlnet"} <= set(HUGGINGFACE_FAMILIES)
    assert "xlnet" in ENCODERS and {"xlnet_base", "xlnet_large"} <= set(preset_names())


def test_an_unknown_model_type_lists_the_registered_ones():
    with pytest.raises(
        ValueError,
        match=(
            r"model_type 'gpt2' is not supported; supported: albert, bert, deberta-v2, distilbert, electra, eurobert, gemma3_text, gte, "
            r"modernbert, nomic_bert, qwen3, roberta, xlm-roberta, xlnet"
        ),
    ):
        encoder_config_from_huggingface({"model_type": "gpt2"})


@pytest.mark.parametrize("family", ["electra", "spanbert", "xlnet"])
def test_models_saved_before_the_move_load_and_give_the_same_outputs(family):
    # Written by tests/fixtures/record_saved_families.py with the layers in bertlayers.layers.
    model = keras.saving.load_model(os.path.join(SAVED, f"{family}.keras"))
    recorded = np.load(os.path.join(SAVED, f"{family}.npz"))
    batch = {key[len("input/") :]: recorded[key] for key in recorded.files if key.startswith("input/")}
    outputs = model(batch, training=False)
    for key in recorded.files:
        if key.startswith("output/"):
            np.testing.assert_allclose(
                np.asarray(outputs[key[len("output/") :]]), recorded[key], atol=1e-6, err_msg=key
            )


TOY_FAMILY = '''
"""A family that lives in one folder outside the library: a layer, a preset, a checkpoint
model_type and a recipe, each registered on import and nothing else edited."""

import keras

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS, bert_config_fields, config_from_fields, map_encoder_weights, read_huggingface_folder,
    register_huggingface_family,
)
from bertlayers.convert.weight_map import WeightMap
from bertlayers.pretraining_data.objectives import OBJECTIVES
from bertlayers.families.recipes import Recipe, register_recipe
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks import build_encoder
from bertlayers.families.bert import BertEncoder
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


@keras.saving.register_keras_serializable(package="toy_family")
class Doubling(keras.layers.Layer):
    """Twice its input, `[batch, ...]` -> `[batch, ...]`."""

    def call(self, inputs):
        return 2 * inputs


register_preset("toy_tiny", EncoderConfig(vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32))


def load_huggingface_toy(path, dtype=None):
    """A "toy" checkpoint keeps BERT's tensor names."""
    _, config, tensors, weights_path = read_huggingface_folder(path, "toy")
    encoder = BertEncoder.from_encoder_config(config, dtype=dtype)
    weights = WeightMap(tensors, weights_path)
    map_encoder_weights(encoder, config, weights)
    weights.apply(ignore=IGNORED_TENSORS)
    return encoder


register_huggingface_family("toy", lambda hf, source: config_from_fields(bert_config_fields(hf, source), source), load_huggingface_toy)
register_recipe(Recipe(
    "toy", "masked LM alone, registered from outside", OBJECTIVES["mlm"],
    lambda config, dtype, options: BertPretrainer(build_encoder(config, dtype=dtype, name="encoder"), next_sentence=False),
))
'''


def test_a_family_is_its_folder_and_its_import(tmp_path, monkeypatch):
    import json

    from bertlayers.convert import load_encoder
    from bertlayers.families.bert import load_huggingface_bert
    from bertlayers.families.recipes import RECIPES, get_recipe
    from bertlayers.networks import build_encoder, get_preset, presets
    from bertlayers.utils.assets import minilm_path

    (tmp_path / "toy_family").mkdir()
    (tmp_path / "toy_family" / "__init__.py").write_text(TOY_FAMILY)
    checkpoint = tmp_path / "toy_checkpoint"  # MiniLM's weights under model_type "toy"
    checkpoint.mkdir()
    config = json.loads(open(os.path.join(minilm_path(), "config.json")).read())
    (checkpoint / "config.json").write_text(json.dumps({**config, "model_type": "toy"}))
    for name in ("model.safetensors", "vocab.txt"):
        os.symlink(os.path.join(minilm_path(), name), checkpoint / name)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        toy = importlib.import_module("toy_family")
        assert build_encoder("toy_tiny").config.hidden_size == 16 and "toy" in recipe_names()
        assert get_recipe("toy").build_pretrainer(get_preset("toy_tiny"), None, {}).encoder.config.num_layers == 1
        ids = {
            "token_ids": np.array([[101, 2023, 102]]),
            "segment_ids": np.zeros((1, 3), int),
            "padding_mask": np.ones((1, 3), int),
        }
        loaded = load_encoder(str(checkpoint))  # picked by its model_type, from the family's registration
        reference = load_huggingface_bert(minilm_path())
        np.testing.assert_allclose(loaded(ids)["pooled_output"], reference(ids)["pooled_output"], atol=1e-6)
        assert float(toy.Doubling()(np.ones(2))[0]) == 2.0
    finally:
        presets._PRESETS.pop("toy_tiny", None)
        RECIPES.pop("toy", None)
        HUGGINGFACE_FAMILIES.pop("toy", None)


@pytest.mark.parametrize(
    "folder, output_key, embedding_key, family",
    [
        (
            "electra_tiny/generator",
            "generator_lm_head.weight",
            "electra.embeddings.word_embeddings.weight",
            "electra",
        ),
        ("xlnet_tiny", "lm_loss.weight", "transformer.word_embedding.weight", "xlnet"),
    ],
)
def test_an_output_matrix_its_config_calls_tied_is_refused_when_it_differs(
    folder, output_key, embedding_key, family, tmp_path
):
    """A config that says tie_word_embeddings (or says nothing) with a separate, different output
    matrix: loaded tied, the logits would be off with no error (untied checkpoints that say so
    load untied: tests/test_subword_checkpoints.py)."""
    import shutil

    from safetensors.numpy import load_file, save_file

    source = os.path.join(os.path.dirname(__file__), "fixtures", folder)
    tensors = load_file(os.path.join(source, "model.safetensors"))
    load = getattr(importlib.import_module(f"bertlayers.families.{family}"), f"load_huggingface_{family}")
    load(source)  # tied (or no separate copy): loads
    copy = tmp_path / "untied"
    shutil.copytree(source, copy)
    tensors[output_key] = tensors[embedding_key] + 0.5
    save_file(tensors, str(copy / "model.safetensors"))
    with pytest.raises(ValueError, match=rf"says tie_word_embeddings .* but {re.escape(output_key)} differs from"):
        load(str(copy))


TOY_MODERN = '''
"""A modern encoder from outside the library: the rotary attention and an RMSNorm registered under
its own kind names, a sliding window on some layers,
RMSNorm, a gated feed-forward network, no biases, token embeddings without positions."""

import keras
from keras import ops

from bertlayers.layers import RotaryAttention, TokenEmbedding
from bertlayers.networks import EncoderBase
from bertlayers.networks.block_parts import register_attention, register_normalization


@keras.saving.register_keras_serializable(package="toy_modern")
class RMSNorm(keras.layers.Layer):
    """x / sqrt(mean(x²) + ε) · γ."""

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)

    def build(self, shape):
        self.scale = self.add_weight(shape=(shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        x32 = ops.cast(x, "float32")
        normed = x32 * ops.rsqrt(ops.mean(ops.square(x32), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(normed * self.scale, x.dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


def rotary(settings, num_heads, key_dim, dropout, kernel_initializer, dtype):
    return RotaryAttention(num_heads, key_dim, rotary_theta=settings.rotary_theta, dropout=dropout, use_bias=settings.use_bias,
                           kernel_initializer=kernel_initializer, dtype=dtype, name="self_attention")


register_attention("toy_rotary", rotary)
register_normalization("toy_rms", RMSNorm)


@keras.saving.register_keras_serializable(package="toy_modern")
class ToyModernEncoder(EncoderBase):
    architecture = "toy_modern"

    def make_embeddings(self, config, dtype):
        return TokenEmbedding(vocabulary_size=config.vocabulary_size, embedding_size=config.hidden_size,
                              max_sequence_length=config.max_sequence_length, type_vocab_size=0,
                              dropout=config.dropout, dtype=dtype, name="embeddings")
'''


def test_a_modern_family_plugs_rotary_attention_a_window_and_rmsnorm_into_the_core(tmp_path, monkeypatch):
    from bertlayers.layers import GatedFeedForward
    from bertlayers.networks import block_parts

    (tmp_path / "toy_modern.py").write_text(TOY_MODERN)
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("toy_modern")
    try:
        kinds = {"full": {"rotary_theta": 160000.0}, "sliding": {"attention_window": 4, "rotary_theta": 10000.0}}
        sizes = dict(
            vocabulary_size=50,
            hidden_size=16,
            num_heads=2,
            intermediate_size=24,
            max_sequence_length=32,
            type_vocab_size=0,
            dropout=0.0,
            attention_dropout=0.0,
            attention="toy_rotary",
            normalization="toy_rms",
            feed_forward="gated",
            use_bias=False,
            norm_first=True,
            layer_kinds=kinds,
        )
        encoder = toy.ToyModernEncoder(num_layers=3, layer_types=("full", "sliding", "sliding"), **sizes)
        blocks = encoder.transformer_layers
        assert [b.attention_window for b in blocks] == [None, 4, 4]
        assert [b.attention_layer.rotary_theta for b in blocks] == [160000.0, 10000.0, 10000.0]
        assert all(
            isinstance(b.attention_layer_norm, toy.RMSNorm) and isinstance(b.feed_forward_layer, GatedFeedForward)
            for b in blocks
        )
        assert isinstance(encoder.final_layer_norm, toy.RMSNorm)
        assert not [w.path for w in encoder.weights if w.path.endswith("bias") and "pooler" not in w.path]

        rng = np.random.default_rng(0)
        ids = rng.integers(1, 50, (2, 12)).astype("int32")
        batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
        outputs = encoder(batch)
        # RMSNorm closes the stack: every row has a mean square of 1 (the scale starts at 1).
        np.testing.assert_allclose(np.mean(np.square(outputs["sequence_output"]), -1), 1.0, rtol=1e-3)
        # Rows computed alone (rotary attention told where they sit, the window kept) equal the full layer's.
        positions = np.array([[0, 5, 11], [3, 4, 7]], "int32")
        rows = encoder.sequence_output_at(outputs, positions, batch["padding_mask"])
        full = np.take_along_axis(np.asarray(outputs["sequence_output"]), positions[..., None], 1)
        np.testing.assert_allclose(rows, full, atol=1e-5)

        # Two sliding layers of window 4 see 2 tokens either side each: position 0 reads tokens 0..4 only.
        local = toy.ToyModernEncoder(num_layers=2, layer_types=("sliding", "sliding"), **sizes)
        changed = {**batch, "token_ids": np.concatenate([ids[:, :5], (ids[:, 5:] % 49) + 1], axis=1)}
        before, after = (np.asarray(local(x)["sequence_output"]) for x in (batch, changed))
        np.testing.assert_allclose(before[:, 0], after[:, 0], atol=1e-6)
        assert np.abs(before[:, 4] - after[:, 4]).max() > 1e-3  # position 4 reads position 6

        path = str(tmp_path / "toy_modern.keras")
        encoder.save(path)
        loaded = keras.saving.load_model(path)
        np.testing.assert_allclose(loaded(batch)["sequence_output"], outputs["sequence_output"], atol=1e-6)
    finally:
        block_parts.ATTENTIONS.pop("toy_rotary", None)
        block_parts.NORMALIZATIONS.pop("toy_rms", None)
        ENCODERS.pop("toy_modern", None)
