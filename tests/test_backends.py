"""The model code on Keras 3's JAX backend, each case in a child process (Keras picks its backend
once per process):
  - with TensorFlow blocked from importing, as on a machine that has only JAX: the package
    imports, every family's pretrainer and the task models build and `fit` (AdamW with layer-wise
    rates and clipping, LAMB) under `jax.jit`, and the parts that need TensorFlow say so by name;
  - data parallelism over 2 host devices equals one device;
  - a `.keras` file trained and saved under JAX loads under TensorFlow and exports for serving,
    its outputs equal;
The layer, network and model tests themselves also run under JAX (`make test`'s second run), and
so does test_huggingface_parity's comparison of the real MiniLM with transformers.
"""

import json

import keras
import numpy as np
import pytest
from processes import environment, python, run

# Makes `import tensorflow` (and tensorflow-text, tensorboard) fail as on a machine without them.
_WITHOUT_TENSORFLOW = """
import importlib.abc, sys
class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text", "tensorboard"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTensorFlow())
"""

TINY = dict(
    vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16
)

# Fits every family's pretrainer and the task models on NumPy batches; trains a classifier with
# DataParallel over the 2 host devices and without it from the same start; saves a trained classifier.
_JAX_ONLY = (
    _WITHOUT_TENSORFLOW
    + """
import json, os, sys
import jax, keras, numpy as np
import bertlayers
from bertlayers.families.electra import ElectraPretrainer, electra_encoders
from bertlayers.families.spanbert import SpanBertPretrainer
from bertlayers.families.xlnet import XLNetEncoder, XLNetPretrainer
from bertlayers.models import BertPretrainer, SequenceClassifier, SpanPredictor, TokenClassifier
from bertlayers.networks import EncoderConfig
from bertlayers.families.albert import AlbertEncoder
from bertlayers.families.bert import BertEncoder
from bertlayers.training import create_optimizer

TINY = %(tiny)s
OUT = sys.argv[1]
rng = np.random.default_rng(0)
B, S, P, V = 8, 12, 3, TINY["vocabulary_size"]
mask = np.ones((B, S), "int32"); mask[1, 7:] = 0; mask[5, 4:] = 0
base = {"token_ids": rng.integers(5, V, (B, S)).astype("int32"), "segment_ids": np.zeros((B, S), "int32"),
        "padding_mask": mask}
positions = np.tile(np.arange(1, P + 1, dtype="int32"), (B, 1))
lm_ids = rng.integers(5, V, (B, P)).astype("int32")
config = EncoderConfig(**TINY)
xlnet = XLNetEncoder.from_encoder_config(config.replace(architecture="xlnet", type_vocab_size=3))
perm = np.triu(np.ones((S, S), "float32"), 1)[None].repeat(B, 0)
target_mapping = np.eye(P, S, 1, dtype="float32")[None].repeat(B, 0)
nsp = rng.integers(0, 2, B)
# name: (model, inputs, targets); the pretrainers compile with their own losses.
cases = {
    "bert": (BertPretrainer(BertEncoder(**TINY)), {**base, "masked_positions": positions}, {"mlm": lm_ids, "nsp": nsp}),
    "albert": (BertPretrainer(AlbertEncoder(embedding_size=8, **TINY)), {**base, "masked_positions": positions},
               {"mlm": lm_ids, "nsp": nsp}),
    "electra": (ElectraPretrainer(*electra_encoders(config, 0.5)),
                {**base, "masked_positions": positions, "masked_lm_ids": lm_ids, "masked_lm_weights": np.ones((B, P), "float32"),
                 "sample_seed": np.tile([[3, 4]], (B, 1)).astype("int32")}, None),  # targets are in the inputs
    "spanbert": (SpanBertPretrainer(BertEncoder(**TINY)),
                 {**base, "masked_positions": positions, "span_left_positions": positions - 1,
                  "span_right_positions": positions + 1, "span_offsets": np.ones((B, P), "int32")},
                 {"mlm": lm_ids, "sbo": lm_ids}),
    "xlnet": (XLNetPretrainer(xlnet), {**base, "perm_mask": perm, "target_mapping": target_mapping}, {"plm": lm_ids}),
    "classifier": (SequenceClassifier(BertEncoder(**TINY), 3), base, rng.integers(0, 3, B)),
    "tagger": (TokenClassifier(BertEncoder(**TINY), 4), base, rng.integers(0, 4, (B, S))),
    "squad": (SpanPredictor(BertEncoder(**TINY)), {**base, "span_mask": mask}, {"start_logits": rng.integers(0, 4, B), "end_logits": rng.integers(0, 4, B)}),
}
sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
report = {"backend": keras.backend.backend(), "devices": len(jax.devices()), "fits": {}}
for name, (model, x, y) in cases.items():
    optimizer = create_optimizer(1e-3, 10, 2, optimizer="lamb" if name == "albert" else "adamw",
                                 layerwise_decay=0.8 if name == "classifier" else None, model=model)
    loss = model.default_losses() if hasattr(model, "default_losses") else None if y is None else sparse
    model.compile(optimizer=optimizer, loss=loss)
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    moved = sum(not np.array_equal(b, np.array(w)) for b, w in zip(before, model.trainable_weights))
    report["fits"][name] = {"loss": float(history.history["loss"][-1]), "moved": moved, "weights": len(before),
                            "jitted": bool(model.jit_compile)}

# A classifier trained under JAX, saved for the TensorFlow side.
keras.utils.set_random_seed(7)
classifier = SequenceClassifier(BertEncoder(**TINY), 2, dropout=0.0)
classifier.compile(optimizer=create_optimizer(1e-3, 10, 2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
classifier.fit(base, rng.integers(0, 2, B), batch_size=4, epochs=1, verbose=0)
classifier.save(os.path.join(OUT, "trained_under_jax.keras"))
predicted = classifier.predict(base, verbose=0)
np.savez(os.path.join(OUT, "jax_side.npz"), **base, **{f"out_{k}": v for k, v in predicted.items()})

# Data parallelism: the same start, the same global batches, one device or two.
def trained(distribution):
    keras.distribution.set_distribution(distribution)
    keras.utils.set_random_seed(11)
    model = SequenceClassifier(BertEncoder(**TINY), 3, dropout=0.0)
    model.compile(optimizer=create_optimizer(1e-2, 10, 0, clip_global_norm=0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start = [np.array(w) for w in model.get_weights()]
    model.fit(base, np.arange(B) %% 3, batch_size=B, epochs=3, shuffle=False, verbose=0)
    keras.distribution.set_distribution(None)
    return start, [np.array(w) for w in model.get_weights()]
(start, one), (_, two) = trained(None), trained(keras.distribution.DataParallel(devices=jax.devices()[:2]))
report["data_parallel_max_difference"] = max(float(np.abs(a - b).max()) for a, b in zip(one, two))
report["data_parallel_largest_move"] = max(float(np.abs(a - b).max()) for a, b in zip(one, start))

try:
    import bertlayers.tokenizers  # noqa: F401
except ModuleNotFoundError as error:
    report["data_error"] = str(error)
report["tensorflow_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
print(json.dumps(report))
"""
)


@pytest.fixture(scope="module")
def jax_only(tmp_path_factory):
    """The JAX-only child's folder (the file it saved) and its report, made once for the module."""
    folder = str(tmp_path_factory.mktemp("jax_only"))
    env = environment(KERAS_BACKEND="jax", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    done = run(python(_JAX_ONLY % {"tiny": repr(TINY)}) + [folder], env=env, timeout=600, fresh=True)
    return folder, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_without_tensorflow_every_family_builds_and_fits_under_jax(jax_only):
    _, report = jax_only
    assert report["backend"] == "jax" and report["tensorflow_loaded"] == []
    assert set(report["fits"]) == {"bert", "albert", "electra", "spanbert", "xlnet", "classifier", "tagger", "squad"}
    for name, fit in report["fits"].items():
        assert np.isfinite(fit["loss"]), name
        assert fit["moved"] >= fit["weights"] // 2, (name, fit)
        assert fit["jitted"], name


@pytest.mark.slow
def test_what_needs_tensorflow_says_so_by_name(jax_only):
    _, report = jax_only
    assert "needs TensorFlow, which is not installed" in report["data_error"]
    assert "pip install tensorflow" in report["data_error"]


@pytest.mark.slow
def test_data_parallel_over_two_devices_equals_one(jax_only):
    _, report = jax_only
    assert report["devices"] == 2
    assert report["data_parallel_max_difference"] < 1e-5
    assert report["data_parallel_largest_move"] > 1e-3  # they trained, to the same weights


@pytest.mark.slow
def test_a_model_trained_under_jax_loads_and_serves_under_tensorflow(jax_only, tmp_path):
    from fresh_serving import run_fresh

    from bertlayers.export import export_for_serving

    folder, _ = jax_only
    saved = dict(np.load(f"{folder}/jax_side.npz"))
    expected = {k[len("out_") :]: saved.pop(k) for k in list(saved) if k.startswith("out_")}
    model = keras.saving.load_model(f"{folder}/trained_under_jax.keras")
    reloaded = model.predict(saved, verbose=0)
    assert set(reloaded) == set(expected)
    for name in expected:
        np.testing.assert_allclose(reloaded[name], expected[name], atol=1e-5, err_msg=name)
    paths = export_for_serving(
        model, "from_jax", base_dir=str(tmp_path / "savedmodels"), text=False, sequence_length=16
    )
    served = run_fresh(paths["from_jax"], "serving_default", saved, tmp_path, text=False)
    np.testing.assert_allclose(served["logits"], expected["logits"], atol=1e-5)
