"""`save_huggingface`: a model written back as a Hugging Face folder.

Against transformers: each random-init folder transformers wrote (tests/fixtures/subword_families/,
`save_pretrained`) is loaded, saved again, and the saved folder holds the same tensors under the
same names and the same config values (only tensors transformers does not read may differ:
RoBERTa's position rows before its first, an untied head's second bias copy), so transformers
loads it as it loads its own; loaded back here it gives transformers' recorded outputs."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

from bertlayers.convert import load_checkpoint, record_tokenizer, save_huggingface
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES
from bertlayers.convert.model_files import _ATTRIBUTE
from bertlayers.tokenizers import ModelTokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCES = {
    group: np.load(os.path.join(FIXTURES, f"{group}.npz")) for group in ("subword_families", "modern_families")
}
# transformers' outputs on the folders save_huggingface writes (tests/fixtures/record_saved_folders.py).
SAVED = np.load(os.path.join(FIXTURES, "saved_folders.npz"))
SUBWORD = [
    "bert_classifier",
    "roberta",
    "roberta_untied",
    "roberta_classifier",
    "xlm-roberta",
    "albert",
    "albert_untied",
    "albert_classifier",
    "distilbert",
    "distilbert_untied",
    "distilbert_classifier",
    "electra_untied",
    "electra_classifier",
    "xlnet",
    "xlnet_untied",
    "xlnet_classifier",
]
MODERN = [
    "modernbert",
    "modernbert_biased_untied",
    "modernbert_classifier",
    "modernbert_classifier_cls",
    "gte",
    "gte_classifier",
    "nomic_bert",
    "nomic_bert_classifier",
    "eurobert_biased",
    "eurobert_untied",
    "eurobert_classifier_bos",
    "eurobert_classifier_late",
    "eurobert_classifier_mean",
]
FOLDERS = [("subword_families", name) for name in SUBWORD] + [("modern_families", name) for name in MODERN]
# Tensors transformers keeps but never reads: RoBERTa's position rows up to pad_token_id (the
# first real token takes row pad + 1), and an untied head's `bias` beside the `decoder.bias` it adds.
UNREAD = {"lm_head.bias", "predictions.bias"}


def _loaded(group, name):
    folder = os.path.join(FIXTURES, group, name)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    model = HUGGINGFACE_FAMILIES[config["model_type"]].loader(folder)
    # These folders hold no tokenizer files: the model records an empty set of its model_type's
    # (set as record_tokenizer does, without the tokenizer it would build to check the size).
    object.__setattr__(model, _ATTRIBUTE, ModelTokenizer((), config["model_type"], pad_id=config.get("pad_token_id")))
    return folder, config, model


@pytest.mark.slow
@pytest.mark.parametrize("group, name", FOLDERS)
def test_a_saved_folder_holds_what_transformers_wrote_and_gives_its_outputs(group, name, tmp_path):
    source, config, model = _loaded(group, name)
    reference, recorded = REFERENCES[group], f"{group}__{name}"
    saved = save_huggingface(model, str(tmp_path / name))

    theirs, ours = (
        load_file(os.path.join(source, "model.safetensors")),
        load_file(os.path.join(saved, "model.safetensors")),
    )
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        if key in UNREAD and not config.get("tie_word_embeddings", True):
            continue
        expected, written = theirs[key], ours[key]
        if key.endswith("position_embeddings.weight") and config["model_type"] in ("roberta", "xlm-roberta"):
            first = config["pad_token_id"] + 1
            expected, written = expected[first:], written[first:]
        np.testing.assert_array_equal(written, expected, err_msg=key)
    with open(os.path.join(saved, "config.json")) as f:
        written_config = json.load(f)
    differs = {k: (config[k], v) for k, v in written_config.items() if k in config and config[k] != v}
    assert differs == {}, differs
    assert written_config["architectures"] == config["architectures"]

    # transformers loaded the folder saved this way and computed what it computes on its own (recorded).
    real = reference[f"{name}.padding_mask"].astype(bool)
    np.testing.assert_allclose(SAVED[f"{recorded}.hidden"][real], reference[f"{name}.hidden"][real], atol=1e-5)
    if "classifier" in name:
        np.testing.assert_allclose(SAVED[f"{recorded}.logits"], reference[f"{name}.logits"], atol=1e-5)

    reloaded = HUGGINGFACE_FAMILIES[config["model_type"]].loader(saved)
    inputs = {key: reference[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}
    encoder = getattr(reloaded, "encoder", reloaded)
    np.testing.assert_allclose(
        np.asarray(encoder(inputs)["sequence_output"])[real], SAVED[f"{recorded}.hidden"][real], atol=1e-4
    )
    if "classifier" in name:
        np.testing.assert_allclose(np.asarray(reloaded(inputs)["logits"]), SAVED[f"{recorded}.logits"], atol=1e-4)
        assert reloaded.label_names == model.label_names


def test_a_model_trained_here_saves_with_its_wordpiece_vocabulary_and_loads_back(tmp_path):
    """A classifier over a BERT encoder with the bert-base-uncased vocabulary: the folder holds
    vocab.txt and tokenizer_config.json, and load_checkpoint gives the same logits and labels."""
    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import SequenceClassifier
    from bertlayers.tokenizers import bert_uncased_vocabulary

    encoder = BertEncoder(
        vocabulary_size=30522, num_layers=2, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=32
    )
    model = record_tokenizer(SequenceClassifier(encoder, label_names=["no", "yes", "maybe"]), bert_uncased_vocabulary())
    folder = save_huggingface(model, str(tmp_path / "mine"))
    assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"} <= set(os.listdir(folder))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert config["architectures"] == ["BertForSequenceClassification"] and config["id2label"]["2"] == "maybe"
    checkpoint = load_checkpoint(folder)
    inputs = checkpoint.tokenizer.encode(["A warm, funny film.", "A dull mess."], sequence_length=16)
    np.testing.assert_allclose(checkpoint.model(inputs)["logits"], model(inputs)["logits"], atol=1e-6)
    assert checkpoint.model.label_names == ["no", "yes", "maybe"]

    with pytest.raises(FileExistsError, match="mine exists"):
        save_huggingface(model, folder)
    bare = SequenceClassifier(BertEncoder.from_config(encoder.get_config()), 2)
    with pytest.raises(ValueError, match="no vocabulary recorded"):
        save_huggingface(bare, str(tmp_path / "bare"))
    with pytest.raises(ValueError, match="A bert encoder cannot be written as a xlnet checkpoint"):
        save_huggingface(model, str(tmp_path / "x"), model_type="xlnet")  # a BERT classifier as XLNet
    assert not (tmp_path / "bare").exists() and not (tmp_path / "x").exists()


def test_a_model_transformers_would_compute_otherwise_is_refused_by_what_differs(tmp_path):
    """BertForSequenceClassification reads [CLS] through the tanh pooler: a classifier that pools the
    mean of the tokens (run_classifier's choice for sentence-transformers' MiniLM), or an ELECTRA
    classifier (its head's GELU) that only a vocab.txt records, is not written as one; named, with
    what to do. ELECTRA's, written as the model_type it was loaded as, loads back with its logits."""
    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import SequenceClassifier
    from bertlayers.tokenizers import bert_uncased_vocabulary

    sizes = dict(vocabulary_size=30522, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32)
    mean = record_tokenizer(SequenceClassifier(BertEncoder(**sizes), 2, pooling="mean"), bert_uncased_vocabulary())
    with pytest.raises(ValueError, match=r"BertForSequenceClassification would compute this SequenceClassifier "
                       r"differently: pooling 'mean' here, 'pooler' there .*build it with pooling='pooler'"):  # fmt: skip
        save_huggingface(mean, str(tmp_path / "mean"))
    electra = record_tokenizer(
        SequenceClassifier(BertEncoder(**sizes, pooler_activation="gelu"), 2), bert_uncased_vocabulary()
    )
    with pytest.raises(ValueError, match=r"pooler_activation 'gelu' here, 'tanh' there.*model_type="):
        save_huggingface(electra, str(tmp_path / "as_bert"))
    assert not (tmp_path / "mean").exists() and not (tmp_path / "as_bert").exists()
    folder = save_huggingface(electra, str(tmp_path / "electra"), model_type="electra")
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["architectures"] == ["ElectraForSequenceClassification"]
    checkpoint = load_checkpoint(folder)
    inputs = checkpoint.tokenizer.encode(["A warm, funny film."], sequence_length=8)
    np.testing.assert_allclose(checkpoint.model(inputs)["logits"], electra(inputs)["logits"], atol=1e-6)


@pytest.mark.parametrize("tied", [True, False])
def test_an_electra_generator_saves_with_the_one_argument_call(tmp_path, tied):
    """`save_huggingface(generator, folder)`: a vocab.txt does not say ELECTRA, the model's class
    does (ElectraForMaskedLM, tied or untied); its pooler, which no masked-LM output reads, does
    not stand in the way; loaded back, the same logits."""
    from bertlayers.families.bert import BertEncoder
    from bertlayers.families.electra.pretrainer import ElectraGenerator
    from bertlayers.tokenizers import bert_uncased_vocabulary

    encoder = BertEncoder(
        vocabulary_size=30522, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, embedding_size=8,
        tie_word_embeddings=tied,
    )  # fmt: skip
    generator = record_tokenizer(ElectraGenerator(encoder), bert_uncased_vocabulary())
    folder = save_huggingface(generator, str(tmp_path / "generator"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert config["architectures"] == ["ElectraForMaskedLM"] and config["tie_word_embeddings"] is tied
    checkpoint = load_checkpoint(folder)
    inputs = checkpoint.tokenizer.encode(["A warm, funny film."], sequence_length=8)
    np.testing.assert_allclose(checkpoint.model(inputs)["mlm"], generator(inputs)["mlm"], atol=1e-5)
