"""ModernBERT, GTE, NomicBERT and EuroBERT checkpoints (encoder, MLM heads tied and untied, classifiers with
their pooling) against transformers' outputs for the same randomly initialized models
(tests/fixtures/record_modern_families.py): within 1e-5 in float32."""

import json
import os

import numpy as np
import pytest

from bertlayers.convert import load_encoder
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "modern_families.npz"))
ATOL = 1e-5


def _folder(name):
    return os.path.join(FIXTURES, "modern_families", name)


def load_checkpoint_model(folder):
    """The folder's whole model (pretrainer or classifier), by its model_type's registered loader."""
    with open(os.path.join(folder, "config.json")) as f:
        return HUGGINGFACE_FAMILIES[json.load(f)["model_type"]].loader(folder)


def _inputs(name):
    return {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}


def _close_at_real_tokens(ours, theirs, mask):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=ATOL, rtol=1e-5)


MASKED_LM = ["modernbert", "modernbert_biased_untied", "gte", "nomic_bert", "eurobert_untied", "eurobert_biased"]
CLASSIFIERS = [
    "modernbert_classifier",
    "modernbert_classifier_cls",
    "gte_classifier",
    "nomic_bert_classifier",
    "eurobert_classifier_late",
    "eurobert_classifier_mean",
    "eurobert_classifier_bos",
]


@pytest.mark.parametrize("name", MASKED_LM)
def test_masked_lm_folders_give_transformers_hidden_states_and_logits(name):
    inputs = _inputs(name)
    encoder = load_encoder(_folder(name))
    _close_at_real_tokens(encoder(inputs)["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"])

    pretrainer = load_checkpoint_model(_folder(name))
    assert pretrainer.encoder.config.tie_word_embeddings == ("untied" not in name)
    positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
    logits = pretrainer({**inputs, "masked_positions": positions})["mlm"]
    _close_at_real_tokens(logits, REFERENCE[f"{name}.logits"], inputs["padding_mask"])


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_classifier_folders_give_transformers_logits(name):
    inputs = _inputs(name)
    classifier = load_checkpoint_model(_folder(name))
    np.testing.assert_allclose(classifier(inputs)["logits"], REFERENCE[f"{name}.logits"], atol=ATOL, rtol=1e-5)
    if f"{name}.pooled" in REFERENCE:
        pooled = classifier.encoder(inputs)["pooled_output"]
        np.testing.assert_allclose(pooled, REFERENCE[f"{name}.pooled"], atol=ATOL, rtol=1e-5)
