import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402
from time_limit import pytest_runtest_makereport, register  # noqa: E402, F401  (the per-test time limit)

# Fixtures that run a training job or export models (tens of seconds once per module or session):
# a test that uses one is in the slow tier, besides the tests marked `slow` one by one.
SLOW_FIXTURES = {"corpus", "electra_run", "xlnet_run", "spanbert_run", "exported", "google_checkpoint"}


def pytest_configure(config):
    register(config)  # the slow tier's total at the end of the run


def pytest_collection_modifyitems(items):
    not_here = pytest.mark.skip(reason=f"checks TensorFlow itself; the backend is {keras.backend.backend()}")
    for item in items:
        if SLOW_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
        if keras.backend.backend() != "tensorflow" and item.get_closest_marker("tensorflow_only"):
            item.add_marker(not_here)


@pytest.fixture(autouse=True)
def _deterministic_float32():
    """Every test starts seeded, in float32, and leaves the global policy as it found it."""
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """The pretraining tests' small real corpus, vocabulary and records (made once: ~30 s)."""
    from pretraining_fixtures import make_corpus

    return make_corpus(str(tmp_path_factory.mktemp("corpus")))
