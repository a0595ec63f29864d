import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


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
