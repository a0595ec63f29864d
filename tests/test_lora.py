"""LoRA (bertlayers.networks.lora): adapters on every family's projections, only they and the head
trained, folded for saving and serving, saved alone and switched by name; --lora_rank in a runner."""

import os

import keras
import numpy as np
import pytest
from processes import run_script

from bertlayers.convert import load_encoder, load_model_file, save_model
from bertlayers.families.bert import BertEncoder
from bertlayers.models import SequenceClassifier
from bertlayers.networks.lora import (
    TaskAdapters,
    adapter_weights,
    enable_lora,
    load_adapter,
    lora_layers,
    merge_lora,
    merged_lora,
    save_adapter,
)
from bertlayers.testing import check_served_equals_keras, encoder_batch

TINY = dict(vocabulary_size=64, num_layers=2, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16)
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
LAYOUTS = os.path.join(FIXTURES, "layouts")


def _classifier(seed=0):
    keras.utils.set_random_seed(seed)
    return SequenceClassifier(BertEncoder(**TINY), 3, dropout=0.0)


def _randomize_adapters(model, seed):
    """B starts at zero (the update starts at nothing); random A and B make every adapter count."""
    rng = np.random.default_rng(seed)
    for layer in lora_layers(model):
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
            variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))


def _logits(model, batch):
    return np.asarray(model(batch)["logits"])


@pytest.mark.slow(reason="fits, saves, loads and exports a LoRA model")
def test_only_the_adapters_and_the_head_train_and_the_folded_model_is_the_same_model(tmp_path):
    batch = encoder_batch(64, sequence_length=8)
    model = _classifier()
    encoder_before = {v.path: np.asarray(v) for v in model.encoder.weights}
    enable_lora(model, 4, "all", alpha=8)
    adapted = {layer.path.split("/", 1)[1] for layer in lora_layers(model)}
    assert adapted == {f"self_attention/{name}" for name in ("query", "key", "value", "attention_output")} | {
        "intermediate",
        "output",
    }
    assert len(lora_layers(model)) == 12  # six projections in each of two blocks
    trainable = {v.path for v in model.trainable_weights}
    assert all("lora_kernel" in path for path in trainable if path in encoder_before or "transformer" in path)
    assert trainable - {p for p in trainable if "lora_kernel" in p} == {v.path for v in model.head.trainable_weights}

    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(True))
    # Saved after every epoch (a run's checkpoints): the fit goes on with its adapters.
    saves = keras.callbacks.LambdaCallback(on_epoch_end=lambda *_: save_model(model, str(tmp_path / "epoch.keras")))
    history = model.fit(batch, {"logits": np.array([0, 1, 2])}, epochs=3, verbose=0, callbacks=[saves])
    assert history.history["loss"][-1] < history.history["loss"][0]
    for variable in model.encoder.weights:  # the encoder as it was; only its adapters moved
        if "lora_kernel" not in variable.path:
            np.testing.assert_array_equal(np.asarray(variable), encoder_before[variable.path], err_msg=variable.path)
    assert any(np.abs(np.asarray(layer.lora_kernel_b)).max() > 0 for layer in lora_layers(model))

    # Folded: W' = W + (alpha / r)·A·B, the definition, and the same outputs as the adapters give.
    expected = _logits(model, batch)
    query = next(layer for layer in lora_layers(model) if layer.name == "query")
    definition = np.asarray(query._kernel) + 2.0 * np.einsum(
        "...r,ro->...o", np.asarray(query.lora_kernel_a), np.asarray(query.lora_kernel_b)
    )
    with merged_lora(model):
        np.testing.assert_allclose(np.asarray(query._kernel), definition, atol=1e-6)
        assert not lora_layers(model) and not any("lora" in v.path for v in model.weights)
        np.testing.assert_allclose(_logits(model, batch), expected, atol=1e-5)
    assert len(lora_layers(model)) == 12  # put back as it was, its predict step too
    np.testing.assert_allclose(model.predict(batch, verbose=0)["logits"], expected, atol=1e-6)

    # Saved: a plain model with the adapters folded in; served: the same answers, folded.
    save_model(model, str(tmp_path / "model.keras"))
    loaded = load_model_file(str(tmp_path / "model.keras"))
    assert not lora_layers(loaded) and len(loaded.weights) == len(model.weights) - 24
    np.testing.assert_allclose(_logits(loaded, batch), expected, atol=1e-5)
    check_served_equals_keras(model, batch, atol=1e-5, sequence_length=8)
    assert len(lora_layers(model)) == 12

    # The adapter alone: onto a fresh copy of the same encoder, the same model again.
    path = save_adapter(model, str(tmp_path / "adapter.safetensors"), task="reviews")
    other = enable_lora(_classifier(), 4, "all", alpha=8)
    np.testing.assert_array_equal(np.asarray(other.encoder.weights[0]), encoder_before[other.encoder.weights[0].path])
    load_adapter(other, path)
    np.testing.assert_allclose(_logits(other, batch), expected, atol=1e-6)
    assert set(adapter_weights(other)) == trainable

    # merge_lora for good: the adapters leave the weights, the model computes the same.
    merge_lora(model)
    assert not lora_layers(model) and not any("lora" in v.path for v in model.trainable_weights)
    np.testing.assert_allclose(model.predict(batch, verbose=0)["logits"], expected, atol=1e-5)


def test_task_adapters_switch_by_name_and_a_misfit_is_refused_before_any_change(tmp_path):
    batch = encoder_batch(64, sequence_length=8)
    model = enable_lora(_classifier(), 2)  # query and value, Hu et al.'s choice
    assert {layer.name for layer in lora_layers(model)} == {"query", "value"}
    adapters = TaskAdapters(model)
    _randomize_adapters(model, 1)
    adapters.add("sentiment")
    first = _logits(model, batch)
    _randomize_adapters(model, 2)
    save_adapter(model, str(tmp_path / "topic.safetensors"))
    adapters.add("topic", str(tmp_path / "topic.safetensors"))
    second = _logits(model, batch)
    assert np.abs(first - second).max() > 1e-4  # (a fresh head's logits are about 0.01)
    np.testing.assert_allclose(_logits(adapters.select("sentiment"), batch), first, atol=1e-6)
    np.testing.assert_allclose(_logits(adapters.select("topic"), batch), second, atol=1e-6)
    with pytest.raises(KeyError, match="No adapter named 'news'; the adapters are sentiment, topic"):
        adapters.select("news")

    wider = enable_lora(_classifier(), 4)
    save_adapter(wider, str(tmp_path / "rank4.safetensors"))
    with pytest.raises(ValueError, match="has rank 4, the model's adapters 2"):
        load_adapter(model, str(tmp_path / "rank4.safetensors"))
    everywhere = enable_lora(_classifier(), 2, "all")
    save_adapter(everywhere, str(tmp_path / "all.safetensors"))
    with pytest.raises(ValueError, match="has projections 12, the model's adapters 4"):
        load_adapter(model, str(tmp_path / "all.safetensors"))
    np.testing.assert_allclose(_logits(model, batch), second, atol=1e-6)  # as it was
    (tmp_path / "other.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ValueError, match="is not a bertlayers LoRA adapter"):
        load_adapter(model, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="has LoRA adapters already"):
        enable_lora(model, 2)
    with pytest.raises(ValueError, match="LoRA target 'ffn' is not a projection"):
        enable_lora(_classifier(), 2, "query,ffn")


def test_every_encoder_of_a_two_tower_dual_encoder_takes_adapters_and_freezes():
    from bertlayers.models import DualEncoder

    keras.utils.set_random_seed(0)
    queries, passages = BertEncoder(**TINY, name="queries"), BertEncoder(**TINY, name="passages")
    model = enable_lora(DualEncoder(queries, passage_encoder=passages), 2)
    assert len(lora_layers(queries)) == len(lora_layers(passages)) == 4  # query and value, two blocks each
    assert model.trainable_weights and all("lora_kernel" in v.path for v in model.trainable_weights)


FAMILY_FOLDERS = {
    "deberta-v2": os.path.join(LAYOUTS, "deberta-v2", "base"),
    "modernbert": os.path.join(LAYOUTS, "modernbert", "base"),
    "xlnet": os.path.join(LAYOUTS, "xlnet", "base"),
    "qwen3": os.path.join(FIXTURES, "decoder_families", "qwen3"),
    "gemma3": os.path.join(FIXTURES, "decoder_families", "gemma3"),
}


# Which projections take adapters is read from the family's layers, the same under any backend; under
# JAX the disentangled and the gated-feed-forward families run the folded outputs' arithmetic.
@pytest.mark.other_backend_cases("deberta-v2", "modernbert")
@pytest.mark.parametrize("family", FAMILY_FOLDERS)
def test_every_familys_projections_take_adapters_and_fold_to_the_same_outputs(family):
    """DeBERTa's disentangled attention (its relative projections reuse query and key), a gated
    feed-forward network (ModernBERT's gate, up and output), the decoders read as encoders (Qwen3's
    grouped-query attention with query/key norms and heads wider than H / heads, Gemma 3's sandwich
    norms and windows), and XLNet, whose two-stream attention keeps raw weights: only its
    feed-forward network takes adapters, and asking for more says so."""
    folder = FAMILY_FOLDERS[family]
    encoder = load_encoder(folder)
    batch = encoder_batch(encoder.config.vocabulary_size, sequence_length=8)
    if family == "xlnet":
        with pytest.raises(ValueError, match="has no query projection to adapt .its dense projections: feed_forward"):
            enable_lora(encoder, 2, "query")
        assert not lora_layers(encoder)
    targets = "feed_forward" if family == "xlnet" else "all"
    enable_lora(encoder, 2, targets)
    _randomize_adapters(encoder, 3)
    adapted = np.asarray(encoder(batch)["sequence_output"])
    assert np.abs(adapted - np.asarray(load_encoder(folder)(batch)["sequence_output"])).max() > 1e-3
    merge_lora(encoder)
    np.testing.assert_allclose(np.asarray(encoder(batch)["sequence_output"]), adapted, atol=1e-5)


@pytest.mark.slow(reason="a LoRA fine-tuning run of run_classifier.py")
def test_run_classifier_with_lora_rank_trains_the_adapters_and_saves_them_alone(tmp_path):
    from bertlayers.runs.finetuning_config import FinetuningConfig

    init = tmp_path / "encoder.keras"
    keras.utils.set_random_seed(0)
    BertEncoder(**{**TINY, "vocabulary_size": 30522, "max_sequence_length": 32}).save(str(init))
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"sentence {i},{'yes' if i % 2 else 'no'}\n" for i in range(16)))
    out = tmp_path / "out"
    run_script(
        "run_classifier.py",
        *("--train_file", data, "--eval_file", data, "--init", init, "--output_dir", out),
        *("--epochs", "2", "--batch_size", "8", "--sequence_length", "16", "--learning_rate", "1e-2"),
        *("--lora_rank", "2", "--lora_targets", "attention", "--verbose", "0"),
    )
    start, tuned = keras.saving.load_model(str(init)), load_model_file(str(out / "model.keras"))
    assert not lora_layers(tuned)  # model.keras: the adapters folded in
    moved = {}
    for before, after in zip(start.weights, tuned.encoder.weights, strict=True):
        moved[after.path] = float(np.abs(np.asarray(after) - np.asarray(before)).max())
    assert {path for path, change in moved.items() if change > 0} == {
        f"transformer_layer_{i}/self_attention/{name}/kernel"
        for i in range(2)
        for name in ("query", "key", "value", "attention_output")
    }
    from safetensors.numpy import load_file

    adapter = load_file(str(out / "lora_adapter.safetensors"))
    assert len([name for name in adapter if "lora_kernel" in name]) == 16 and len(adapter) == 18  # + the head
    with pytest.raises(ValueError, match="lora_rank .* cannot be combined with feature_based or freeze_layers"):
        FinetuningConfig(output_dir=str(tmp_path / "x"), lora_rank=2, freeze_layers=1)
