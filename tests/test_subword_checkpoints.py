"""RoBERTa, XLM-R, ALBERT and DistilBERT checkpoints, tied and untied LM heads (and XLNet's and
ELECTRA's untied ones), against transformers' outputs for the same randomly initialized models
(tests/fixtures/record_subword_families.py)."""

import os

import numpy as np
import pytest

import bertlayers
from bertlayers.convert import load_encoder

pytestmark = pytest.mark.slow

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "subword_families.npz"))


def _folder(name):
    return os.path.join(FIXTURES, "subword_families", name)


def _inputs(name):
    return {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}


def _close_at_real_tokens(ours, theirs, mask, atol=1e-4):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=atol, rtol=1e-4)


@pytest.mark.parametrize("name", ["roberta", "roberta_untied", "xlm-roberta", "albert", "albert_untied", "distilbert", "distilbert_untied"])
def test_masked_lm_folders_give_transformers_outputs(name):
    model = load_encoder(_folder(name))  # the encoder, through the model_type's registered loader
    inputs = _inputs(name)
    outputs = model(inputs)
    _close_at_real_tokens(outputs["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"])

    family = name.split("_")[0]
    loader = {"roberta": "load_huggingface_roberta", "xlm-roberta": "load_huggingface_roberta",
              "albert": "load_huggingface_albert", "distilbert": "load_huggingface_distilbert"}[family]
    pretrainer = getattr(bertlayers.convert, loader)(_folder(name))
    assert pretrainer.encoder.config.tie_word_embeddings == (not name.endswith("untied"))
    positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
    logits = pretrainer({**inputs, "masked_positions": positions})["mlm"]
    _close_at_real_tokens(logits, REFERENCE[f"{name}.logits"], inputs["padding_mask"])


def test_an_untied_electra_generator_and_xlnet_head_give_transformers_logits():
    from bertlayers.convert import load_huggingface_electra, load_huggingface_xlnet

    generator = load_huggingface_electra(_folder("electra_untied"))
    inputs = _inputs("electra_untied")
    _close_at_real_tokens(generator(inputs)["mlm"], REFERENCE["electra_untied.logits"], inputs["padding_mask"])

    xlnet = load_huggingface_xlnet(_folder("xlnet_untied"))
    inputs = _inputs("xlnet_untied")
    content = xlnet.encoder(inputs)["sequence_output"]  # XLNet's content stream, left padding
    _close_at_real_tokens(content, REFERENCE["xlnet_untied.hidden"], inputs["padding_mask"])
    # Without a target mapping transformers projects the content stream through lm_loss.
    _close_at_real_tokens(xlnet.lm_head(content), REFERENCE["xlnet_untied.logits"], inputs["padding_mask"])


def test_untied_models_save_and_load_with_their_own_output_matrix(tmp_path):
    pretrainer = bertlayers.convert.load_huggingface_roberta(_folder("roberta_untied"))
    inputs = _inputs("roberta_untied")
    positions = np.tile(np.arange(12, dtype="int32"), (3, 1))
    path = str(tmp_path / "untied.keras")
    pretrainer.save(path)
    loaded = bertlayers.convert.load_model_file(path)
    np.testing.assert_allclose(
        loaded({**inputs, "masked_positions": positions})["mlm"], pretrainer({**inputs, "masked_positions": positions})["mlm"], atol=1e-6
    )
    embedding = loaded.encoder.token_embedding
    assert not embedding.tie_weights and embedding.reverse_embeddings.shape == (32, 2000)
