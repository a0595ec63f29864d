"""A user's own model, end to end: composed from the layers (or a loaded encoder with the user's
own head), fit, saved, reloaded, exported, and answered in a process without Keras."""

import os
import zipfile

import keras
import numpy as np
import pytest
from fresh_serving import run_fresh
from pretraining_fixtures import minilm_shaped_folder

from bertlayers.convert import load_encoder, load_model_file, record_tokenizer, recorded_tokenizer, save_model
from bertlayers.export import ClassifierOutputs, export_for_serving
from bertlayers.layers import BertEmbeddings, ClassificationHead, TransformerEncoderBlock
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer
from bertlayers.utils.assets import minilm_path

SEQ = 24
TEXTS = ["a gripping, beautifully acted film", "dull and far too long"]


def composed_model():
    """Embeddings + two blocks + a classification head, with no segment input."""
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    x = BertEmbeddings(vocabulary_size=30522, embedding_size=32, max_sequence_length=64, dropout=0.0)(token_ids)
    for _ in range(2):
        x = TransformerEncoderBlock(num_heads=2, intermediate_size=64, dropout=0.0)(x, padding_mask=padding_mask)
    logits = ClassificationHead(num_classes=2, dropout=0.0, name="sentiment")(x[:, 0])  # [batch, 2]
    return keras.Model({"token_ids": token_ids, "padding_mask": padding_mask}, logits, name="composed")


def loaded_with_a_head(folder):
    """The encoder of a Hugging Face folder with MiniLM's tokenizer files and the user's own head on
    its [CLS] row, two outputs in a dict."""
    encoder = load_encoder(minilm_shaped_folder(folder))
    inputs = {
        name: keras.Input((None,), dtype="int32", name=name) for name in ("token_ids", "segment_ids", "padding_mask")
    }
    sequence = encoder(inputs)["sequence_output"]  # [batch, seq, hidden]
    pooled = sequence[:, 0]  # [batch, hidden]
    outputs = {"logits": keras.layers.Dense(2, name="logits")(pooled), "embedding": pooled}
    model = keras.Model(inputs, outputs, name="users_model")
    return record_tokenizer(model, f"{minilm_path()}/vocab.txt"), encoder


@pytest.mark.slow(reason="fits, saves, reloads and exports a user's model (one over a loaded Hugging Face folder)")
@pytest.mark.parametrize("build, as_classifier", [("composed", True), ("loaded", False)])
def test_a_users_model_fits_saves_reloads_exports_and_serves(build, as_classifier, tmp_path):
    packer = model_tokenizer(bert_uncased_vocabulary()).packer(SEQ)
    packed = {name: np.asarray(value) for name, value in packer(TEXTS * 4).items()}
    labels = np.array([1, 0] * 4)
    if build == "composed":
        model = record_tokenizer(composed_model(), bert_uncased_vocabulary())
        x = {name: packed[name] for name in ("token_ids", "padding_mask")}
        model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        logits_name, y = "sentiment", labels
    else:
        model, encoder = loaded_with_a_head(str(tmp_path / "folder"))
        assert recorded_tokenizer(encoder).lowercase  # read from the folder's vocab.txt and tokenizer_config.json
        x = packed
        model.compile(
            keras.optimizers.Adam(1e-4),
            {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "embedding": None},
        )
        logits_name, y = "logits", {"logits": labels}
    before = model.get_weights()
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights())), "fit changed nothing"

    path = str(tmp_path / "model.keras")
    save_model(model, path)
    assert model.optimizer is not None and model.compiled  # the model itself keeps training
    with zipfile.ZipFile(path) as archive:  # weights and config only: no optimizer variables
        assert not any("optimizer" in name for name in archive.namelist())
    model.save(str(tmp_path / "with_optimizer.keras"))
    assert os.path.getsize(path) < os.path.getsize(tmp_path / "with_optimizer.keras")
    reloaded = load_model_file(path)
    assert recorded_tokenizer(reloaded) == recorded_tokenizer(model)
    expected = reloaded.predict(x, verbose=0)
    expected = expected if isinstance(expected, dict) else {logits_name: expected}

    paths = export_for_serving(reloaded, "mine", base_dir=str(tmp_path / "savedmodels"), sequence_length=SEQ)
    served = run_fresh(paths["mine"], "serving_default", x, tmp_path, text=False)
    assert set(served) == set(expected)
    for name in expected:
        np.testing.assert_allclose(served[name], expected[name], atol=1e-4, err_msg=name)
    by_text = run_fresh(paths["mine_text"], "serving_default", {"text": np.array(TEXTS * 4)}, tmp_path, text=True)
    np.testing.assert_allclose(by_text[logits_name], expected[logits_name], atol=1e-4)

    if not as_classifier:
        return
    # The same logits served as a classifier: labels and names, by the user's choice of outputs.
    classifier = export_for_serving(
        reloaded,
        "mine_labels",
        base_dir=str(tmp_path / "savedmodels"),
        sequence_length=SEQ,
        text=False,
        outputs=ClassifierOutputs(label_names=["negative", "positive"], output=logits_name),
    )
    labelled = run_fresh(classifier["mine_labels"], "serving_default", x, tmp_path, text=False)
    assert labelled["label"].tolist() == expected[logits_name].argmax(-1).tolist()
    assert [n.decode() for n in labelled["label_name"]] == [["negative", "positive"][i] for i in labelled["label"]]


def test_a_model_without_a_recorded_vocabulary_is_refused_by_name(tmp_path):
    model = composed_model()
    with pytest.raises(ValueError, match=r"Functional 'composed' has no recorded vocabulary.*text=False"):
        export_for_serving(model, "mine", base_dir=str(tmp_path), sequence_length=SEQ)
    assert not (tmp_path / "mine").exists()
    written = export_for_serving(model, "mine", base_dir=str(tmp_path), text=False, sequence_length=SEQ)
    assert list(written) == ["mine"]


def test_what_serving_cannot_feed_or_return_is_named(tmp_path):
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    extra = keras.Input((None,), dtype="int32", name="word_ids")
    x = BertEmbeddings(vocabulary_size=100, embedding_size=8, max_sequence_length=16)(token_ids)
    model = keras.Model({"token_ids": token_ids, "word_ids": extra}, x)
    with pytest.raises(ValueError, match=r"\['word_ids'\] cannot be fed"):
        export_for_serving(model, "m", base_dir=str(tmp_path), text=False)
    scalar = keras.Model(token_ids, keras.ops.mean(x))
    with pytest.raises(ValueError, match="have no batch axis"):
        export_for_serving(scalar, "m", base_dir=str(tmp_path), text=False)
    from bertlayers.families.bert import BertEncoder

    encoder = BertEncoder(
        vocabulary_size=100, num_layers=1, hidden_size=8, num_heads=2, intermediate_size=16, max_sequence_length=16
    )
    with pytest.raises(ValueError, match="label_names needs a classifier's logits"):
        export_for_serving(encoder, "m", base_dir=str(tmp_path), text=False, label_names=["a", "b"])
    fixed = keras.Input((8,), dtype="int32", name="token_ids")
    dense_only = keras.Model(fixed, keras.layers.Dense(2)(keras.ops.cast(fixed, "float32")))
    with pytest.raises(ValueError, match="holds no bertlayers encoder or BertEmbeddings layer"):
        export_for_serving(dense_only, "m", base_dir=str(tmp_path), text=False)
