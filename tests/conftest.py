import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA (every JAX step, here and in the JAX children, which inherit it) compiles for the suite's
# tiny models, where compiling is most of a test's time under JAX: without LLVM's optimizations (a
# quarter less of it), and with the CPU backend's older loop emitters instead of its fusion
# emitters (an MLIR pipeline a fused op, most of the 10-15 ms each small program took to compile:
# the compile time of test_refused_calls' ELECTRA case and test_block_seams 16.4 -> 6.6 s). XLA's
# own passes still run: the same programs, computed alike.
for flag in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"):
    if flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()

import gc  # noqa: E402

import keras  # noqa: E402
import pytest  # noqa: E402
from lighter_grappler import leave_out_gpu_passes  # noqa: E402
from time_limit import pytest_runtest_makereport, register  # noqa: E402, F401  (the per-test time limit)

leave_out_gpu_passes()  # Grappler's passes that change nothing in CPU graphs (tests/lighter_grappler.py)

# Fixtures that run a training job or export models (tens of seconds once per module or session):
# a test that uses one is in the slow tier, besides the tests marked `slow` one by one.
SLOW_FIXTURES = {
    "corpus": "builds a WordPiece vocabulary and pretraining records from Wikipedia articles",
    "electra_run": "pretrains a tiny ELECTRA",
    "xlnet_run": "pretrains a tiny XLNet",
    "spanbert_run": "pretrains a tiny SpanBERT",
    "exported": "exports five task models with their text signatures",
    "google_checkpoint": "writes and reads a TensorFlow 1 checkpoint",
    "deberta_run": "pretrains a tiny DeBERTa-v3",
    "served_families": "fine-tunes, saves and exports a classifier of each subword family",
    "served_models": "fine-tunes, saves and exports a classifier of each modern model type",
    "jax_only": "fits every family under JAX in a child without TensorFlow",
    "folders": "trains each subword family's tokenizer files (test_subword_tokenizers)",
}


def pytest_configure(config):
    register(config)  # the slow tier's total at the end of the run
    if os.environ.get("BERTLAYERS_TEST_PROFILE"):  # where the time goes (tests/cost_profile.py)
        import cost_profile

        cost_profile.register(config)


def pytest_collection_modifyitems(items):
    backend = keras.backend.backend()
    not_here = pytest.mark.skip(reason=f"checks TensorFlow itself; the backend is {backend}")
    same_path = pytest.mark.skip(reason="takes the code path of the cases run under this backend; run under TensorFlow")
    for item in items:
        slow_fixtures = sorted(SLOW_FIXTURES.keys() & set(item.fixturenames))
        if slow_fixtures:
            item.add_marker(
                pytest.mark.slow(reason="; ".join(f"{name}: {SLOW_FIXTURES[name]}" for name in slow_fixtures))
            )
        if backend != "tensorflow" and item.get_closest_marker("tensorflow_only"):
            item.add_marker(not_here)
        cases = item.get_closest_marker("other_backend_cases")
        callspec = getattr(item, "callspec", None)  # a test without parameters: `other_backend_cases()` is no case
        if backend != "tensorflow" and cases and (callspec is None or callspec.id not in cases.args):
            item.add_marker(same_path)


def pytest_collection_finish(session):
    _freeze_survivors()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if nextitem is None or nextitem.module is not item.module:  # the module's fixtures are gone
        _freeze_survivors()
    elif _resident_mb() > _collected_at_mb[0] + COLLECT_AFTER_MB:
        gc.collect()
        _collected_at_mb[0] = _resident_mb()


# The collector runs between modules and when a worker has grown by this much since it last ran.
COLLECT_AFTER_MB = 1024
_collected_at_mb = [0]


def _resident_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def _freeze_survivors():
    """Python's full collections walk every object a worker holds: TensorFlow's and Keras's modules
    and whatever the run's earlier modules keep alive (400,000 objects and more, 0.2-0.5 s a walk,
    a tenth of a test's time where models are made and dropped). Between test modules the objects
    that survive a collection are moved out of the collector's sight (`gc.freeze`): later walks
    cover only what the next module makes. A frozen object is still freed when its last reference
    goes; only a cycle among frozen objects that becomes garbage later stays.

    Within a module the automatic collections are off: a model's graphs and layers hold cycles by
    the ten thousand, so Python's thresholds ran a full walk every few seconds of tracing (48 in
    test_refused_calls and test_modern_checkpoints, 7 s of their 117). The garbage of a module's
    tests waits for its end, or for the worker to grow by `COLLECT_AFTER_MB` (test_layouts,
    test_export and test_deberta_v2 in one worker, the two run one after the other: 186 -> 172 s,
    the peak 2.1 -> 2.5 GB)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    _collected_at_mb[0] = _resident_mb()


@pytest.fixture(autouse=True)
def _deterministic_float32():
    """Every test starts seeded, in float32, and leaves the global policy as it found it."""
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, worker_id):
    """The pretraining tests' small real corpus, vocabulary and records: made once a run (~30 s),
    by the first worker that needs it, in the folder pytest-xdist's workers share; the other reads
    what it made."""
    import json

    from pretraining_fixtures import make_corpus

    from bertlayers.utils.atomic_files import locked

    root = tmp_path_factory.getbasetemp()
    folder = (root if worker_id == "master" else root.parent) / "shared_corpus"
    made = folder / "made.json"
    with locked(str(folder), "make the shared corpus in"):
        if not made.exists():
            made.write_text(json.dumps(make_corpus(str(folder))))
    return json.loads(made.read_text())
