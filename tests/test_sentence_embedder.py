"""Sentence embeddings: the pooled vector by its definition, saving, and the text SavedModel
(strings in, unit vectors out, equal to the Keras model's)."""

import os

import keras
import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.models import SentenceEmbedder
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday, the third fall this week."]


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder(BertEncoder(**TINY))


def test_the_embedding_is_the_normalized_mean_of_the_real_tokens(embedder, tmp_path):
    inputs = model_tokenizer(bert_uncased_vocabulary()).packer(24)(TEXTS)
    embedding = embedder.predict_on_batch(inputs)["embedding"]
    sequence = np.asarray(embedder.encoder(inputs)["sequence_output"])
    mask = inputs["padding_mask"][..., None].astype("float32")
    mean = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(embedding, mean / np.linalg.norm(mean, axis=-1, keepdims=True), atol=1e-5)
    embedder.save(str(tmp_path / "embedder.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "embedder.keras"))
    assert (loaded.pooling, loaded.normalize) == ("mean", True)
    np.testing.assert_allclose(loaded.predict_on_batch(inputs)["embedding"], embedding, atol=1e-6)
    with pytest.raises(ValueError, match="SentenceEmbedder has no loss of its own"):
        embedder.compile("adam")


def test_the_text_savedmodel_serves_unit_vectors_equal_to_keras(embedder, tmp_path):
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    paths = export_for_serving(
        embedder, "embedder", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=24
    )
    served = (
        tf.saved_model.load(paths["embedder_text"])
        .signatures["serving_default"](text=tf.constant(TEXTS))["embedding"]
        .numpy()
    )
    np.testing.assert_allclose(np.linalg.norm(served, axis=-1), 1.0, atol=1e-5)
    expected = embedder.predict_on_batch(model_tokenizer(bert_uncased_vocabulary()).packer(24)(TEXTS))["embedding"]
    np.testing.assert_allclose(served, expected, atol=1e-5)


ST_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sentence_transformers")


@pytest.fixture(scope="module")
def st_reference():
    return np.load(ST_FIXTURES + ".npz")


@pytest.mark.parametrize(
    "name",
    [
        "weighted_dense_prompts",
        "cls_identity",
        "last_token",
        "sqrt_len",
        "weighted_without_prompt",
        "cls_without_prompt",
    ],
)
def test_sentence_transformers_folders_embed_as_sentence_transformers_does(name, st_reference):
    """Folders sentence-transformers 6.2 wrote (a pooling mode each, Dense layers with their
    activation and bias, Normalize, prompts and a default one, a similarity function, pooling that
    leaves [CLS] and the prompt's pieces out: `include_prompt` false) give its
    `encode` within 1e-5: with the default prompt, each named prompt, truncated to 4 dimensions
    and normalized, and its `similarity` (tests/fixtures/record_sentence_transformers.py)."""
    from bertlayers.tasks import TextEmbedder

    texts = [str(t) for t in st_reference["texts"]]
    embedder = TextEmbedder.from_checkpoint(os.path.join(ST_FIXTURES, name))
    assert embedder.sequence_length == 32  # the Transformer module's max_seq_length
    default = embedder.encode(texts)
    np.testing.assert_allclose(default, st_reference[f"{name}.default"], atol=1e-5)
    for prompt in embedder.prompts:
        if f"{name}.{prompt}" in st_reference:
            np.testing.assert_allclose(
                embedder.encode(texts, prompt_name=prompt), st_reference[f"{name}.{prompt}"], atol=1e-5
            )
    truncated = embedder.encode(texts, truncate_dim=4, normalize=True)
    np.testing.assert_allclose(truncated, st_reference[f"{name}.truncated"], atol=1e-5)
    # Quantized last, as sentence-transformers' encode(precision=...): the signs, 8 to a byte.
    np.testing.assert_array_equal(embedder.encode(texts, precision="ubinary"), np.packbits(default > 0, axis=-1))
    np.testing.assert_allclose(
        embedder.similarity(default[:1], default), st_reference[f"{name}.similarity"], rtol=1e-5, atol=1e-5
    )


@pytest.mark.slow(reason="the real all-MiniLM-L6-v2 loaded and run on four texts")
def test_the_real_minilm_folder_embeds_as_sentence_transformers_does(st_reference):
    """The bundled all-MiniLM-L6-v2, a folder in sentence-transformers' pre-6.0 layout (Pooling's
    `pooling_mode_*` switches, `sentence_bert_config.json`'s max_seq_length, Normalize)."""
    from bertlayers.tasks import TextEmbedder
    from bertlayers.utils.assets import minilm_path

    embedder = TextEmbedder.from_checkpoint(minilm_path())
    assert embedder.sequence_length == 256 and embedder.model.pooling == "mean" and embedder.model.normalize
    texts = [str(t) for t in st_reference["texts"]]
    np.testing.assert_allclose(embedder.encode(texts), st_reference["minilm.default"], atol=1e-5)


def test_what_the_library_cannot_compute_of_a_sentence_transformers_folder_is_refused_by_name(tmp_path):
    import json
    import shutil

    from bertlayers.tasks import TextEmbedder

    folder = tmp_path / "model"
    shutil.copytree(os.path.join(ST_FIXTURES, "weighted_dense_prompts"), folder)
    pooling = folder / "1_Pooling" / "config.json"
    original = json.loads(pooling.read_text())
    for change, message in (
        ({"include_prompt": "no"}, r"1_Pooling/config.json: include_prompt must be true or false, got 'no'"),
        ({"pooling_mode": ["mean", "max"]}, r"pooling mode \['mean', 'max'\]; .*several concatenated"),
    ):
        pooling.write_text(json.dumps({**original, **change}))
        with pytest.raises(ValueError, match=message):
            TextEmbedder.from_checkpoint(str(folder))
    pooling.write_text(json.dumps(original))
    original_modules = json.loads((folder / "modules.json").read_text())
    modules = original_modules[:2] + [
        {"idx": 9, "name": "9", "path": "9_LayerNorm", "type": "sentence_transformers.models.LayerNorm"}
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"modules.json: module 2 is sentence_transformers.models.LayerNorm"):
        TextEmbedder.from_checkpoint(str(folder))
    # Dense modules follow the pooling (EmbeddingGemma has two); one before it is out of order.
    (folder / "modules.json").write_text(json.dumps([original_modules[0], original_modules[2], original_modules[1]]))
    with pytest.raises(ValueError, match=r"the modules are \['Transformer', 'Dense', 'Pooling'\]; expected"):
        TextEmbedder.from_checkpoint(str(folder))
    embedder = TextEmbedder.from_checkpoint(os.path.join(ST_FIXTURES, "weighted_dense_prompts"))
    with pytest.raises(
        ValueError, match=r"prompt_name 'title' is not among the prompts \['document', 'passage', 'query'\]"
    ):
        embedder.encode(["x"], prompt_name="title")
    with pytest.raises(ValueError, match=r"truncate_dim must be in \[1, 8\], got 9"):
        embedder.encode(["x"], truncate_dim=9)


@pytest.mark.slow(reason="a sentence-transformers folder exported as a text SavedModel")
def test_a_sentence_transformers_folder_serves_its_embeddings_as_text_in(tmp_path, st_reference):
    """Its Dense and Normalize modules are in the served graph: the text model answers what
    sentence-transformers computes (the prompt prepended by the client); saved and loaded, the
    embedder keeps its prompts and similarity function."""
    import tensorflow as tf

    from bertlayers.tasks import TextEmbedder

    texts = [str(t) for t in st_reference["texts"]]
    embedder = TextEmbedder.from_checkpoint(os.path.join(ST_FIXTURES, "weighted_dense_prompts"))
    paths = embedder.export(str(tmp_path / "savedmodels"), "embedder")
    served = tf.saved_model.load(paths["embedder_text"]).signatures["serving_default"]
    answer = served(text=tf.constant([embedder.prompts["query"] + text for text in texts]))["embedding"]
    np.testing.assert_allclose(answer.numpy(), st_reference["weighted_dense_prompts.default"], atol=1e-5)
    # The `embed` signature: the prompt named in the request, Matryoshka dimensions, re-normalized.
    embed = tf.saved_model.load(paths["embedder_text"]).signatures["embed"]
    truncated = embed(text=tf.constant(texts), prompt_name=tf.constant("query"), dimensions=tf.constant(4))
    np.testing.assert_allclose(
        truncated["embedding"].numpy(), st_reference["weighted_dense_prompts.truncated"], atol=1e-5
    )
    whole = embed(text=tf.constant(texts), prompt_name=tf.constant("passage"), dimensions=tf.constant(0))["embedding"]
    np.testing.assert_allclose(whole.numpy(), st_reference["weighted_dense_prompts.passage"], atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="prompt_name must be one of"):
        embed(text=tf.constant(texts), prompt_name=tf.constant("title"), dimensions=tf.constant(0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dimensions must be in"):
        embed(text=tf.constant(texts), prompt_name=tf.constant(""), dimensions=tf.constant(99))
    embedder.save(str(tmp_path / "embedder.keras"))
    again = TextEmbedder.load(str(tmp_path / "embedder.keras"))
    assert (again.prompts, again.default_prompt_name, again.similarity_name) == (
        embedder.prompts,
        "query",
        "dot",
    )
    np.testing.assert_allclose(again.encode(texts), st_reference["weighted_dense_prompts.default"], atol=1e-5)


@pytest.mark.slow(reason="a sentence-transformers folder that pools without its prompt, exported as a text SavedModel")
def test_a_folder_pooling_without_its_prompt_serves_as_sentence_transformers_encodes(tmp_path, st_reference):
    """`include_prompt` false served: the `embed` signature leaves the named prompt's tokens out of
    the pooling as sentence-transformers' encode(prompt_name=...) does; a text without a prompt
    (serving_default, the ids model) pools every token, as encode(prompt="")."""
    import tensorflow as tf

    from bertlayers.tasks import TextEmbedder

    texts = [str(t) for t in st_reference["texts"]]
    embedder = TextEmbedder.from_checkpoint(os.path.join(ST_FIXTURES, "weighted_without_prompt"))
    assert not embedder.model.include_prompt and embedder.prompt_length("query: ") == 3  # [CLS] query :
    paths = embedder.export(str(tmp_path / "savedmodels"), "embedder")
    text_model = tf.saved_model.load(paths["embedder_text"])
    for prompt in ("query", "passage"):
        served = text_model.signatures["embed"](
            text=tf.constant(texts), prompt_name=tf.constant(prompt), dimensions=tf.constant(0)
        )["embedding"]
        np.testing.assert_allclose(served.numpy(), st_reference[f"weighted_without_prompt.{prompt}"], atol=1e-5)
    plain = embedder.encode(texts, prompt="")
    assert np.abs(plain - st_reference["weighted_without_prompt.query"]).max() > 1e-3  # the prompt shows
    served = text_model.signatures["serving_default"](text=tf.constant(texts))["embedding"]
    np.testing.assert_allclose(served.numpy(), plain, atol=1e-5)
    ids = embedder.packer(texts)
    answer = tf.saved_model.load(paths["embedder"]).signatures["serving_default"](
        **{name: tf.constant(value) for name, value in ids.items()}
    )["embedding"]
    np.testing.assert_allclose(answer.numpy(), plain, atol=1e-5)


@pytest.mark.parametrize("name", ["weighted_dense_prompts", "last_token", "weighted_without_prompt"])
def test_an_embedder_saves_the_files_sentence_transformers_writes(name, tmp_path, st_reference):
    """`TextEmbedder.save_huggingface` writes the module files sentence-transformers 6.2 wrote for
    the same model (modules.json, Pooling, Dense, Normalize, sentence_bert_config.json), the same
    Dense weights, its prompts and similarity function; read back, the embeddings are
    sentence-transformers' own (sentence-transformers itself, loading such a folder, gives the
    recorded embeddings exactly: tests/fixtures/check_saved_sentence_transformers.py).
    `save_huggingface` of a SentenceEmbedder writes this layout too."""
    import json

    from bertlayers.convert import save_huggingface
    from bertlayers.convert.checkpoint_tensors import read_safetensors
    from bertlayers.tasks import TextEmbedder

    source = os.path.join(ST_FIXTURES, name)
    embedder = TextEmbedder.from_checkpoint(source)
    saved = embedder.save_huggingface(str(tmp_path / name))
    modules = [entry for entry in os.listdir(source) if os.path.isdir(os.path.join(source, entry))]
    assert modules and sorted(modules) == sorted(e for e in os.listdir(saved) if os.path.isdir(os.path.join(saved, e)))
    for module in modules:  # Pooling, Dense, Normalize: their config and a Dense module's weights
        config = os.path.join(module, "config.json")
        assert json.load(open(os.path.join(saved, config))) == json.load(open(os.path.join(source, config))), config
        if os.path.isfile(os.path.join(source, module, "model.safetensors")):
            ours = read_safetensors(os.path.join(saved, module, "model.safetensors"))
            theirs = read_safetensors(os.path.join(source, module, "model.safetensors"))
            assert sorted(ours) == sorted(theirs)
            for key in theirs:
                np.testing.assert_array_equal(np.asarray(ours[key]), np.asarray(theirs[key]))
    for file in ("modules.json", "sentence_bert_config.json"):
        assert json.load(open(os.path.join(saved, file))) == json.load(open(os.path.join(source, file))), file
    settings = json.load(open(os.path.join(saved, "config_sentence_transformers.json")))
    original = json.load(open(os.path.join(source, "config_sentence_transformers.json")))
    for key in ("model_type", "prompts", "default_prompt_name", "similarity_fn_name"):
        assert settings[key] == original[key], key
    again = TextEmbedder.from_checkpoint(saved)
    texts = [str(t) for t in st_reference["texts"]]
    np.testing.assert_allclose(again.encode(texts), st_reference[f"{name}.default"], atol=1e-5)
    assert again.sequence_length == embedder.sequence_length
    assert sorted(os.listdir(save_huggingface(embedder.model, str(tmp_path / "plain")))) == sorted(os.listdir(saved))
