"""Every family the library loads, in every layout transformers writes (tests/fixtures/layouts/,
recorded by tests/fixtures/record_layouts.py): the base model (`XModel.save_pretrained`, no prefix),
the masked LM tied and untied, the pretraining heads, sequence and token classification. Each folder
loads through the loader its model_type registered and answers as transformers did, within 1e-5."""

import json
import os

import numpy as np
import pytest

from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
ROOT = os.path.join(FIXTURES, "layouts")
REFERENCE = np.load(os.path.join(FIXTURES, "layouts.npz"))
FOLDERS = sorted(
    f"{family}/{layout}" for family in os.listdir(ROOT) for layout in os.listdir(os.path.join(ROOT, family))
)
# Layouts the library refuses, and the words its error says them with.
REFUSED = {"modernbert/token_classifier": "ModernBertForTokenClassification folder is not supported"}


def _close_at_real_tokens(ours, theirs, mask):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=1e-5, rtol=1e-5)


def _head_logits(model, layout, inputs):
    """The head's logits, at every position where the head reads tokens."""
    kind = type(model).__name__
    if kind == "XLNetPretrainer":  # without a target mapping transformers projects the content stream
        return model.lm_head(model.encoder(inputs)["sequence_output"])
    if kind == "BertPretrainer":
        positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
        return model({**inputs, "masked_positions": positions})["mlm"]
    outputs = model(inputs)
    return outputs[{"ElectraGenerator": "mlm", "ElectraDiscriminator": "rtd"}.get(kind, "logits")]


@pytest.mark.parametrize("key", FOLDERS)
def test_every_layout_transformers_writes_loads_and_matches_it(key):
    folder = os.path.join(ROOT, key)
    with open(os.path.join(folder, "config.json")) as f:
        loader = HUGGINGFACE_FAMILIES[json.load(f)["model_type"]].loader
    if key in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[key]):
            loader(folder)
        return
    model = loader(folder)
    inputs = {name: REFERENCE[f"{key}.{name}"] for name in ("token_ids", "segment_ids", "padding_mask")}
    mask = inputs["padding_mask"]
    encoder = getattr(model, "encoder", model)
    _close_at_real_tokens(encoder(inputs)["sequence_output"], REFERENCE[f"{key}.hidden"], mask)
    layout = key.split("/")[1]
    if layout == "base":
        assert model is encoder, f"{key}: a base-model folder loads as its encoder, got {type(model).__name__}"
        return
    expected = {
        "mlm": ("BertPretrainer", "XLNetPretrainer", "ElectraGenerator"),
        "mlm_untied": ("BertPretrainer", "XLNetPretrainer", "ElectraGenerator"),
        "pretraining": ("BertPretrainer",),
        "discriminator": ("ElectraDiscriminator",),
        "classifier": ("SequenceClassifier",),
        "token_classifier": ("TokenClassifier",),
    }[layout]
    assert type(model).__name__ in expected, f"{key} loaded as {type(model).__name__}"
    if layout.startswith("mlm"):
        assert encoder.config.tie_word_embeddings == (layout == "mlm")
    logits = np.asarray(_head_logits(model, layout, inputs))
    if layout == "classifier":
        np.testing.assert_allclose(logits, REFERENCE[f"{key}.logits"], atol=1e-5, rtol=1e-5)
    else:
        _close_at_real_tokens(logits, REFERENCE[f"{key}.logits"], mask)
