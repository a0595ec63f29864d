"""Encoder configs, presets, parameter counts, serialization and padding invariance."""

import os

import keras
import numpy as np
import pytest

from bertlayers.families.albert import AlbertEncoder
from bertlayers.families.bert import BertEncoder
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks import EncoderConfig, build_encoder, get_preset, preset_names

TINY = dict(
    vocabulary_size=60,
    num_layers=2,
    hidden_size=16,
    num_heads=2,
    intermediate_size=32,
    max_sequence_length=16,
)
rng = np.random.default_rng(0)


def encoder_inputs(lengths, seq):
    batch = len(lengths)
    token_ids = np.zeros((batch, seq), "int32")
    segment_ids = np.zeros((batch, seq), "int32")
    for row, length in enumerate(lengths):
        token_ids[row, :length] = rng.integers(1, TINY["vocabulary_size"], size=length)
        segment_ids[row, length // 2 : length] = 1
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": (token_ids != 0).astype("int32"),
    }


def padded(inputs, extra):
    return {name: np.pad(value, ((0, 0), (0, extra))) for name, value in inputs.items()}


# --- Config validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_size": 100, "num_heads": 12}, r"hidden_size \(100\) must be divisible by num_heads \(12\)"),
        ({"num_layers": 0}, r"EncoderConfig.num_layers must be an int with 1 <= value, got 0"),
        ({"vocabulary_size": -5}, r"EncoderConfig.vocabulary_size must be an int with 1 <= value, got -5"),
        ({"intermediate_size": 3.5}, r"EncoderConfig.intermediate_size must be an integer, got 3.5 \(float\)"),
        ({"activation": "sigmoidish"}, r"EncoderConfig.activation: Unknown activation 'sigmoidish'"),
        ({"dropout": 1.5}, r"EncoderConfig.dropout must be a float with 0 <= value < 1, got 1.5"),
        ({"layer_norm_epsilon": 0.0}, r"EncoderConfig.layer_norm_epsilon must be a float with 0 < value, got 0.0"),
        ({"embedding_size": 0}, r"EncoderConfig.embedding_size must be an int with 1 <= value, got 0"),
        ({"num_layers": 2, "layer_types": ("a",)}, r"layer_types names 1 layers; the encoder has num_layers=2"),
        (
            {"num_layers": 1, "layer_types": ("a",), "layer_kinds": {"a": {"hidden_size": 8}}},
            r"layer_kinds\['a'\] sets hidden_size; a layer may set only attention, ",
        ),
        (
            {"num_layers": 1, "layer_types": ("a",), "layer_kinds": {"a": {"attention_window": 0}}},
            r"layer_kinds\['a'\]: EncoderConfig.attention_window must be an int with 1 <= value, got 0",
        ),
        ({"num_layers": 1, "layer_types": ("b",), "layer_kinds": {"a": {}}}, r"layer_types\[0\] is 'b', not a kind"),
        ({"rotary_theta": 0.0}, r"EncoderConfig.rotary_theta must be a float with 0 < value, got 0.0"),
        ({"architecture": ""}, r"EncoderConfig.architecture must be a name"),
        ({"feed_forward": "moe"}, r"feed_forward 'moe' needs num_experts"),
        ({"num_experts": 2, "experts_per_token": 3}, r"experts_per_token \(3\) cannot exceed num_experts \(2\)"),
    ],
)
def test_config_validation_names_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        EncoderConfig(**changes)


def test_an_encoder_of_distinct_blocks_refuses_layer_groups():
    with pytest.raises(ValueError, match=r"num_layer_groups is 2, but BertEncoder builds one block per layer"):
        BertEncoder(
            vocabulary_size=10, num_layers=2, hidden_size=8, num_heads=2, intermediate_size=8, num_layer_groups=2
        )


def test_unknown_architecture_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"Unknown architecture 'gpt'; registered: albert, bert"):
        build_encoder(EncoderConfig(architecture="gpt"))


def test_encoder_constructor_validates_through_the_config():
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be divisible by num_heads \(4\)"):
        BertEncoder(**{**TINY, "hidden_size": 30, "num_heads": 4})


def test_albert_groups_cannot_exceed_layers():
    with pytest.raises(ValueError, match=r"num_layer_groups \(3\) cannot exceed num_layers \(2\)"):
        AlbertEncoder(**TINY, num_layer_groups=3)


# --- Presets ----------------------------------------------------------------------------------


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown preset 'bert_huge'. Known presets: .*bert_base.*bert_tiny"):
        get_preset("bert_huge")
    # A Hub id, as keras-hub's from_preset takes it: where pretrained weights come from here.
    with pytest.raises(ValueError, match=r"random weights; pretrained weights load from a checkpoint folder or Hub"):
        BertEncoder.from_preset("hf://sentence-transformers/all-MiniLM-L6-v2")


def test_compact_bert_presets():
    compact = [name for name in preset_names() if name.startswith("bert_uncased_L-")]
    assert len(compact) == 24
    for layers in (2, 4, 6, 8, 10, 12):
        for hidden in (128, 256, 512, 768):
            config = get_preset(f"bert_uncased_L-{layers}_H-{hidden}_A-{hidden // 64}")
            assert (config.num_layers, config.hidden_size) == (layers, hidden)
            assert config.num_heads == hidden // 64 and config.intermediate_size == 4 * hidden
    for alias, (layers, hidden) in {
        "bert_tiny": (2, 128),
        "bert_mini": (4, 256),
        "bert_small": (4, 512),
        "bert_medium": (8, 512),
    }.items():
        config = get_preset(alias)
        assert (config.num_layers, config.hidden_size) == (layers, hidden)


def layered_count(name, num_layers):
    """The parameters of preset `name`'s encoder at `num_layers` (its other sizes as published)."""
    return build_encoder(get_preset(name).replace(num_layers=num_layers)).count_params()


@pytest.mark.other_backend_cases()  # counting parameters takes no backend-specific path
@pytest.mark.parametrize("name, published", [("bert_base", 110e6), ("bert_large", 340e6)])
def test_published_parameter_counts(name, published):
    """The encoder's count at the preset's depth, from builds of one and two of its layers: the
    layers are alike (the embeddings and pooler once, then a block a layer), which bert_tiny's full
    build confirms exactly. Building BERT-large itself (340M values drawn) took 14 s for the same sum."""
    one, two = layered_count(name, 1), layered_count(name, 2)
    count = one + (get_preset(name).num_layers - 1) * (two - one)
    assert abs(count - published) / published <= 0.02, count
    tiny_one, tiny_two = layered_count("bert_tiny", 1), layered_count("bert_tiny", 2)
    assert (
        tiny_one + (get_preset("bert_tiny").num_layers - 1) * (tiny_two - tiny_one)
        == build_encoder("bert_tiny").count_params()
    )


def test_albert_presets_share_layers():
    config = get_preset("albert_large")
    assert config.architecture == "albert" and config.embedding_size == 128
    with pytest.raises(ValueError, match="is a albert architecture"):
        BertEncoder.from_preset("albert_base")


# --- Encoders ---------------------------------------------------------------------------------


@pytest.mark.parametrize("encoder_cls", [BertEncoder, AlbertEncoder])
def test_outputs(encoder_cls):
    encoder = encoder_cls(**TINY)
    outputs = encoder(encoder_inputs([5, 3], seq=7))
    assert tuple(outputs["sequence_output"].shape) == (2, 7, 16)
    assert tuple(outputs["pooled_output"].shape) == (2, 16)
    assert len(outputs["encoder_outputs"]) == 2
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
    assert {t.name for t in encoder.inputs} == {"token_ids", "segment_ids", "padding_mask"}
    assert all(t.dtype == "int32" for t in encoder.inputs)


def _executed_calls(fn, inputs, block):
    """{call scope of `block`: the op types it executed} when `fn(inputs)` runs as a graph."""
    import re

    import tensorflow as tf
    from tensorflow.python.eager import context

    scope = re.compile(rf"/{block.name}(_\d+)?/")
    context.enable_run_metadata()
    try:
        tf.function(fn)(inputs)
        graphs = context.export_run_metadata().function_graphs
    finally:
        context.disable_run_metadata()
    calls = {}
    for node in (n for g in graphs for part in g.partition_graphs for n in part.node):
        found = scope.search(node.name)
        if found and node.op not in ("ReadVariableOp", "_Arg", "_Retval", "Const", "Identity"):
            calls.setdefault(found.group(0), set()).add(node.op)
    return calls


@pytest.mark.tensorflow_only
def test_a_pooled_only_graph_runs_the_last_block_on_the_first_row_alone():
    """`pooled_output` comes from the last block run on [CLS] alone, a second call of that block
    in the encoder's graph: a graph that returns only `pooled_output` (a classifier's) executes
    that call and not the full one, a graph that returns only `sequence_output` the other, and
    both agree with the pooler applied to the full last layer."""
    encoder = BertEncoder(**TINY)
    inputs = encoder_inputs([5, 3], seq=7)
    last = encoder.transformer_layers[-1]
    pooled_only = _executed_calls(lambda x: encoder(x)["pooled_output"], inputs, last)
    sequence_only = _executed_calls(lambda x: encoder(x)["sequence_output"], inputs, last)
    assert len(pooled_only) == 1 and len(sequence_only) == 1 and pooled_only.keys() != sequence_only.keys()
    # Only the full call scatters the real tokens' rows back into the padded sequence; the
    # [CLS]-only call has no padding to skip.
    assert "ScatterNd" in next(iter(sequence_only.values()))
    assert "ScatterNd" not in next(iter(pooled_only.values()))
    outputs = encoder(inputs)
    np.testing.assert_allclose(outputs["pooled_output"], encoder.pooler(outputs["sequence_output"]), atol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("norm_first", [False, True])
def test_pretrainer_heads_read_the_last_layer_at_their_rows_only(norm_first):
    """The pretrainer's masked-LM and next-sentence heads read the last layer's rows at the
    masked positions and [CLS], computed by one call of the last block on those rows: the
    same logits as the heads over the full last layer, and the full call never runs."""
    encoder = BertEncoder(**TINY, norm_first=norm_first)
    pretrainer = BertPretrainer(encoder)
    inputs = encoder_inputs([7, 4], seq=7)
    inputs["masked_positions"] = np.array([[1, 5, 0], [2, 3, 0]], "int32")
    outputs = pretrainer(inputs)
    sequence = np.asarray(encoder(inputs)["sequence_output"])
    at_masks = np.take_along_axis(sequence, inputs["masked_positions"][..., None], axis=1)
    np.testing.assert_allclose(outputs["mlm"], pretrainer.lm_head(at_masks), atol=1e-5)
    np.testing.assert_allclose(outputs["nsp"], pretrainer.next_sentence_head(encoder.pooler(sequence)), atol=1e-5)
    calls = _executed_calls(lambda x: pretrainer(x)["mlm"], inputs, encoder.transformer_layers[-1])
    assert len(calls) == 1 and "ScatterNd" not in next(iter(calls.values()))  # the rows call, not the full one


def test_albert_shares_one_block_and_factorizes_the_embedding():
    albert = AlbertEncoder(
        **{**TINY, "num_layers": 4, "vocabulary_size": 1000, "hidden_size": 64, "num_heads": 4}, embedding_size=8
    )
    bert = BertEncoder(**{**TINY, "num_layers": 4, "vocabulary_size": 1000, "hidden_size": 64, "num_heads": 4})
    assert len(albert.transformer_layers) == 1 and len(bert.transformer_layers) == 4
    block = bert.transformer_layers[0].count_params()
    assert albert.transformer_layers[0].count_params() == block
    # ALBERT's token table is V x E, BERT's V x H.
    assert tuple(albert.token_embedding.embeddings.shape) == (1000, 8)
    assert tuple(bert.token_embedding.embeddings.shape) == (1000, 64)
    assert albert.count_params() < bert.count_params() - 3 * block
    outputs = albert(encoder_inputs([6, 4], seq=6))["encoder_outputs"]
    assert not np.allclose(outputs[0], outputs[1])  # the shared block is applied repeatedly


def test_albert_layer_groups():
    albert = AlbertEncoder(**{**TINY, "num_layers": 4}, num_layer_groups=2)
    assert len(albert.transformer_layers) == 2
    assert albert.stack.block_of_layer == (0, 0, 1, 1)


@pytest.mark.parametrize(
    "encoder_cls, extra", [(BertEncoder, {}), (BertEncoder, {"norm_first": True}), (AlbertEncoder, {})]
)
def test_keras_save_and_load(tmp_path, encoder_cls, extra):
    encoder = encoder_cls(**TINY, **extra, name="tiny")
    inputs = encoder_inputs([5, 3], seq=6)
    expected = encoder(inputs)
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, encoder_cls)
    assert loaded.config == encoder.config
    actual = loaded(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(actual[key], expected[key], atol=1e-6)


@pytest.mark.parametrize("encoder_cls", [BertEncoder, AlbertEncoder])
def test_padding_invariance(encoder_cls):
    encoder = encoder_cls(**TINY)
    inputs = encoder_inputs([5, 3], seq=5)
    short = encoder(inputs)
    long = encoder(padded(inputs, 7))
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(long["sequence_output"][0, :5], short["sequence_output"][0, :5], atol=1e-5)
    np.testing.assert_allclose(long["sequence_output"][1, :3], short["sequence_output"][1, :3], atol=1e-5)


def test_mixed_bfloat16_encoder(tmp_path):
    encoder = BertEncoder(**TINY, dtype="mixed_bfloat16")
    outputs = encoder(encoder_inputs([5, 3], seq=6))
    assert outputs["sequence_output"].dtype == "bfloat16"
    assert all(weight.dtype == "float32" for weight in encoder.weights)
    assert encoder.layer_dtype_policy.name == "mixed_bfloat16"
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.layer_dtype_policy.name == "mixed_bfloat16"
    assert loaded(encoder_inputs([5, 3], seq=6))["sequence_output"].dtype == "bfloat16"
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(outputs["sequence_output"], "float32"))))


def test_bad_inputs_are_named():
    encoder = BertEncoder(**TINY)
    inputs = encoder_inputs([5, 3], seq=6)
    with pytest.raises(TypeError, match="token_ids must be an integer tensor"):
        encoder({**inputs, "token_ids": inputs["token_ids"].astype("float32")})
    with pytest.raises(ValueError, match="sequence length 20, longer than the maximum 16"):
        encoder(padded(inputs, 14))
    with pytest.raises(ValueError, match='Missing data for input "padding_mask"'):
        encoder({"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]})
    # Extra keys are ignored, never matched to the encoder's inputs by position.
    extra = {**inputs, "masked_positions": np.zeros((2, 2), "int32"), "labels": np.zeros((2,), "int32")}
    np.testing.assert_array_equal(encoder(extra)["sequence_output"], encoder(inputs)["sequence_output"])


@pytest.mark.tensorflow_only
def test_over_long_sequence_is_rejected_inside_a_graph_with_unknown_length():
    import tensorflow as tf

    encoder = BertEncoder(**TINY)
    spec = {name: tf.TensorSpec((None, None), tf.int32) for name in ("token_ids", "segment_ids", "padding_mask")}
    serve = tf.function(lambda inputs: encoder(inputs)["pooled_output"], input_signature=[spec])
    serve(encoder_inputs([5, 3], seq=6))
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the maximum sequence length 16"):
        serve(padded(encoder_inputs([5, 3], seq=6), 14))


@pytest.mark.slow
def test_encoder_fine_tunes_with_fit():
    encoder = BertEncoder(**TINY)
    inputs = {
        name: keras.Input((None,), dtype="int32", name=name) for name in ("token_ids", "segment_ids", "padding_mask")
    }
    logits = keras.layers.Dense(2)(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = encoder_inputs([6, 5, 4, 3], seq=6)
    labels = np.array([0, 1, 0, 1])
    history = model.fit(data, labels, epochs=8, batch_size=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_a_mixture_of_experts_encoder_routes_every_second_layer_and_trains_its_routers(tmp_path):
    """nomic-embed-text-v2's shape: every second layer's feed-forward a mixture of experts
    (`layer_kinds`); the other layers keep their dense network; in `fit` the load-balancing losses
    join the task loss, and the routers learn; the encoder saves and loads."""
    from bertlayers.layers import MixtureOfExperts
    from bertlayers.models import SequenceClassifier

    kinds = {"dense": {}, "moe": {"feed_forward": "moe", "num_experts": 4, "experts_per_token": 2}}
    encoder = BertEncoder(**{**TINY, "num_layers": 2}, layer_types=("dense", "moe"), layer_kinds=kinds)
    blocks = [layer for layer in encoder.layers if layer.name.startswith("transformer_layer")]
    assert [type(getattr(b, "feed_forward_layer", None)).__name__ for b in blocks] == ["NoneType", "MixtureOfExperts"]
    moe = blocks[1].feed_forward_layer
    assert isinstance(moe, MixtureOfExperts) and moe.num_experts == 4
    model = SequenceClassifier(encoder, 2)
    model.compile(keras.optimizers.Adam(1e-2))
    router = np.asarray(moe.router).copy()
    history = model.fit(encoder_inputs([6, 5, 4, 3], seq=6), {"logits": np.array([0, 1, 0, 1])}, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and not np.allclose(np.asarray(moe.router), router)
    encoder.save(str(tmp_path / "moe.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "moe.keras"))
    inputs = encoder_inputs([6, 4], seq=6)
    np.testing.assert_allclose(
        np.asarray(loaded(inputs)["sequence_output"]), np.asarray(encoder(inputs)["sequence_output"]), atol=1e-5
    )


def test_a_causal_encoder_pools_its_last_real_token():
    """Under causal attention [CLS] sees only itself; the pooled output must read the whole text."""
    encoder = BertEncoder(**TINY, causal=True)
    inputs = encoder_inputs([5, 3], seq=5)
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["token_ids"][:, 2] = (changed["token_ids"][:, 2] + 1) % TINY["vocabulary_size"]
    pooled, pooled_changed = encoder(inputs)["pooled_output"], encoder(changed)["pooled_output"]
    # Pooling [CLS] would leave every row exactly unchanged.
    assert np.all(np.abs(np.asarray(pooled) - np.asarray(pooled_changed)).max(axis=-1) > 1e-6)
    # Still independent of how far the batch is padded.
    np.testing.assert_allclose(encoder(padded(inputs, 7))["pooled_output"], pooled, atol=1e-5)


@pytest.mark.slow(reason="compiles the predictor and trains between its calls")
def test_the_compiled_predictor_equals_predict_and_follows_training():
    from bertlayers.models import SequenceClassifier, compiled_predictor

    model = SequenceClassifier(BertEncoder(**TINY), 3)
    predict = compiled_predictor(model)
    for lengths, seq in (([6, 2], 6), ([3], 4)):  # two shapes: each compiles once
        data = encoder_inputs(lengths, seq)
        outputs = predict(data)
        assert isinstance(outputs["logits"], np.ndarray)
        np.testing.assert_allclose(outputs["logits"], model.predict_on_batch(data)["logits"], atol=1e-5)
    # The weights are read at each call: after a training step it answers with the new ones.
    model.compile(keras.optimizers.Adam(1e-1), {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    model.fit(data, {"logits": np.array([2])}, verbose=0)
    np.testing.assert_allclose(predict(data)["logits"], model.predict_on_batch(data)["logits"], atol=1e-5)
    # Layers frozen after it was made: it follows the new trainable / non-trainable partition.
    model.encoder.freeze_lower_layers(0)
    model.compile(keras.optimizers.Adam(1e-1), {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    model.fit(data, {"logits": np.array([0])}, verbose=0)
    np.testing.assert_allclose(predict(data)["logits"], model.predict_on_batch(data)["logits"], atol=1e-5)
    with pytest.raises(TypeError, match="compiled_predictor needs a keras.Model, got Dense"):
        compiled_predictor(keras.layers.Dense(2))
