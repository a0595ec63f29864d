"""Decoders read as encoders against transformers' outputs for small randomly initialized models
(tests/fixtures/record_decoder_families.py), within 1e-5 in float32: Qwen3 (Qwen3-Embedding,
Qwen3-Reranker; its base model's and two causal-LM folders, tied and untied, left-padded rows, and
a `Qwen3ForSequenceClassification` folder whose texts end in the pad id, padded left and right) and
Gemma 3 made bidirectional (EmbeddingGemma; its base model's and its causal-LM class's folders,
sliding windows narrower than the rows, two rotary bases); each saved back holds what transformers
wrote."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file

from bertlayers.convert import save_huggingface
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES
from bertlayers.convert.model_files import _ATTRIBUTE
from bertlayers.families.gemma3 import gemma3_config_from_huggingface
from bertlayers.families.qwen3 import qwen3_config_from_huggingface
from bertlayers.models import AnswerTokenScorer, SentenceEmbedder, SequenceClassifier
from bertlayers.tokenizers import ModelTokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "decoder_families.npz"))
YES_ID, NO_ID = 9, 8  # as recorded
ATOL = 1e-5


def _folder(name):
    return os.path.join(FIXTURES, "decoder_families", name)


def _loaded(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    return config, HUGGINGFACE_FAMILIES[config["model_type"]].loader(folder)


def _check_outputs(name, model, inputs):
    """The folder's model gives transformers' hidden states at the real tokens, the embedding
    (Qwen3-Embedding's: the last token's; EmbeddingGemma's: the mean; unit length), and its LM
    logits; a Qwen3 causal LM the reranker's score too."""
    real = inputs["padding_mask"].astype(bool)
    encoder = getattr(model, "encoder", model)
    hidden = np.asarray(encoder(inputs)["sequence_output"])
    np.testing.assert_allclose(hidden[real], REFERENCE[f"{name}.hidden"][real], atol=ATOL, rtol=1e-5)
    pooling = "mean" if name.startswith("gemma3") else "last"
    embedding = SentenceEmbedder(encoder, pooling=pooling)(inputs)["embedding"]
    np.testing.assert_allclose(embedding, REFERENCE[f"{name}.embedding"], atol=ATOL)
    if name == "gemma3_masked_lm":
        positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
        logits = np.asarray(model({**inputs, "masked_positions": positions})["mlm"])
        np.testing.assert_allclose(logits[real], REFERENCE[f"{name}.logits"][real], atol=ATOL, rtol=1e-5)
    elif name == "qwen3_classifier":  # the same rows padded left and right: the last token not the pad id
        np.testing.assert_allclose(model(inputs)["logits"], REFERENCE[f"{name}.logits"], atol=ATOL)
        right = {key: REFERENCE[f"{name}.right_{key}"] for key in ("token_ids", "padding_mask")}
        right["segment_ids"] = np.zeros_like(right["token_ids"])
        np.testing.assert_allclose(model(right)["logits"], REFERENCE[f"{name}.right_logits"], atol=ATOL)
    elif f"{name}.logits" in REFERENCE:
        logits = np.asarray(model(inputs)["lm"])
        np.testing.assert_allclose(logits[real], REFERENCE[f"{name}.logits"][real], atol=ATOL, rtol=1e-5)
        score = AnswerTokenScorer(model, YES_ID, NO_ID)(inputs)["score"]
        np.testing.assert_allclose(score, REFERENCE[f"{name}.score"], atol=ATOL)


CLASSES = {
    "qwen3": "Qwen3Encoder",
    "qwen3_causal_lm": "CausalLMPretrainer",
    "qwen3_causal_lm_untied": "CausalLMPretrainer",
    "qwen3_classifier": "SequenceClassifier",  # Qwen3ForSequenceClassification, its texts ending in the pad id
    "gemma3": "Gemma3Encoder",
    "gemma3_masked_lm": "BertPretrainer",  # bidirectional: its LM head reads the positions asked for
}


# Under JAX one folder a family: the causal blocks with query/key norms, and the sandwich norms and windows.
@pytest.mark.other_backend_cases("qwen3_causal_lm", "gemma3")
@pytest.mark.parametrize("name", list(CLASSES))
def test_folders_give_transformers_outputs_and_save_back_as_transformers_wrote_them(name, tmp_path):
    source = _folder(name)
    config, model = _loaded(source)
    assert type(model).__name__ == CLASSES[name]
    inputs = {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "padding_mask")}
    inputs["segment_ids"] = np.zeros_like(inputs["token_ids"])
    _check_outputs(name, model, inputs)

    # Saved back: the same tensors under the same names, the same config values and class, so
    # transformers reads it as its own folder; loaded back here, the same outputs.
    object.__setattr__(model, _ATTRIBUTE, ModelTokenizer((), config["model_type"], pad_id=config["pad_token_id"]))
    saved = save_huggingface(model, str(tmp_path / name))
    theirs, ours = (load_file(os.path.join(folder, "model.safetensors")) for folder in (source, saved))
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    with open(os.path.join(saved, "config.json")) as f:
        written = json.load(f)
    # json.dumps: the same value of the same JSON type (transformers refuses 12.0 where it takes 12).
    assert {
        k: (config[k], v)
        for k, v in written.items()
        if k in config and json.dumps(config[k], sort_keys=True) != json.dumps(v, sort_keys=True)
    } == {}
    assert written["architectures"] == config["architectures"]
    _check_outputs(name, _loaded(saved)[1], inputs)
    if name == "qwen3_causal_lm":  # a learned LM bias that Qwen3ForCausalLM has no tensor for: refused
        model.lm_head.output_bias.assign(np.full(model.lm_head.output_bias.shape, 0.5, "float32"))
        with pytest.raises(ValueError, match=r"has no tensor for the LM head's output bias \(no lm_head.bias\)"):
            save_huggingface(model, str(tmp_path / "moved"))
        assert not os.path.exists(tmp_path / "moved")
    if name == "qwen3_classifier":  # a head transformers' class would read otherwise: refused, by setting
        assert model.label_names == ["negative", "neutral", "positive"] and model.pad_id == 0
        for settings, refused in (
            ({"output_bias": False}, "pad_id None here, 0 there.*build it with pad_id=0,"),  # would read <|endoftext|>
            ({"pad_id": 0}, "output_bias True here, False there.*build it with output_bias=False,"),
        ):
            other = SequenceClassifier(model.encoder, label_names=model.label_names, pooling="last", **settings)
            object.__setattr__(other, _ATTRIBUTE, getattr(model, _ATTRIBUTE))
            with pytest.raises(ValueError, match=refused):
                save_huggingface(other, str(tmp_path / "other"))
        assert not os.path.exists(tmp_path / "other")
        rebuilt = SequenceClassifier.from_config(model.get_config())  # as a .keras file reads it
        rebuilt.set_weights(model.get_weights())
        assert (rebuilt.pad_id, rebuilt.output_bias, rebuilt.pooling) == (0, False, "last")
        np.testing.assert_array_equal(rebuilt(inputs)["logits"], model(inputs)["logits"])
    if name == "gemma3":  # Gemma's own layers and the block's new settings survive a .keras file
        import keras

        model.save(str(tmp_path / "gemma3.keras"))
        _check_outputs(name, keras.saving.load_model(str(tmp_path / "gemma3.keras")), inputs)


def test_configs_transformers_would_read_otherwise_are_refused_by_field(tmp_path):
    with open(os.path.join(_folder("qwen3"), "config.json")) as f:
        config = json.load(f)
    assert qwen3_config_from_huggingface(config, "config.json").head_size == 16  # 32 / 4 would be 8
    defaults = {k: v for k, v in config.items() if k not in ("head_dim", "rope_parameters", "tie_word_embeddings")}
    read = qwen3_config_from_huggingface(defaults, "config.json")  # transformers' defaults, not H / heads
    assert (read.head_size, read.rotary_theta, read.tie_word_embeddings) == (128, 10000.0, False)
    for change, named in (
        ({"attention_bias": True}, "attention_bias"),
        ({"use_sliding_window": True}, "use_sliding_window"),
        ({"layer_types": ["full_attention", "sliding_attention"]}, "sliding_attention"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}}, "yarn"),
    ):
        with pytest.raises(ValueError, match=named):
            qwen3_config_from_huggingface({**config, **change}, "config.json")
    with pytest.raises(ValueError, match="must be a token id in"):
        AnswerTokenScorer(_loaded(_folder("qwen3_causal_lm"))[1], 2000, NO_ID)
    # A token classifier's folder (its `score` a tag per token) is refused, not read as a sequence classifier.
    import shutil

    tagger = shutil.copytree(_folder("qwen3_classifier"), tmp_path / "tagger")
    with open(os.path.join(tagger, "config.json"), "w") as f:
        json.dump({**config, "architectures": ["Qwen3ForTokenClassification"]}, f)
    with pytest.raises(ValueError, match=r"config.json names \['Qwen3ForTokenClassification'\]"):
        _loaded(str(tagger))
    with open(os.path.join(_folder("gemma3"), "config.json")) as f:
        gemma = json.load(f)
    read = gemma3_config_from_huggingface(gemma, "config.json")
    assert read.attention_scale == 12**-0.5 and read.layer_settings(0).attention_window == 4
    for change, named in (
        ({"use_bidirectional_attention": False}, "use_bidirectional_attention"),
        ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
        ({"layer_types": ["chunked_attention"] * 4}, "chunked_attention"),
    ):
        with pytest.raises(ValueError, match=named):
            gemma3_config_from_huggingface({**gemma, **change}, "config.json")


def test_qwen3_embedding_preset_has_the_published_parameter_count():
    """Qwen3-Embedding-0.6B: 595,776,512 parameters (keras-hub's published count for its
    preset), besides the encoder's summary dense layer (H² + H) a Qwen3 folder has no tensor
    for; counted from builds of one and two layers at a small vocabulary (its table adds V · H,
    tied)."""
    from bertlayers.networks import build_encoder
    from bertlayers.networks.presets import get_preset

    preset = get_preset("qwen3_embedding_0_6b")
    small = preset.replace(vocabulary_size=8)
    one, two = (build_encoder(small.replace(num_layers=n)).count_params() for n in (1, 2))
    count = one + (preset.num_layers - 1) * (two - one) + (preset.vocabulary_size - 8) * preset.hidden_size
    assert count - (preset.hidden_size**2 + preset.hidden_size) == 595_776_512


PROMPTED = {  # folder: (its first prompt's start, the side it pads)
    "qwen3_embedding": ("Instruct: Given a web search query", "left"),
    "embeddinggemma": ("task: search result | query: ", "left"),  # GemmaTokenizer's default side
}


@pytest.mark.slow(reason="an embedder exported and served as text in (its SavedModels written and loaded)")
@pytest.mark.parametrize("name", PROMPTED)
def test_an_embedding_folder_encodes_and_serves_as_sentence_transformers_encodes_with_its_query_prompt(name, tmp_path):
    """Qwen3-Embedding's layout (sentence-transformers 6.3 wrote it: Transformer over a Qwen3Model
    whose tokenizer_config.json pads on the left with <|endoftext|>, as transformers 5 writes it
    with `add_prefix_space: null`; lasttoken pooling; Normalize; the query instruction as a prompt)
    and EmbeddingGemma's (a bidirectional Gemma 3 over Gemma's byte-fallback BPE, padded on the left
    as GemmaTokenizer pads where its config names no side; mean pooling; two Dense modules;
    Normalize): `encode` with and without the query prompt within 1e-5; its text SavedModel's
    `embed` signature answers the same, the prompt named in the request."""
    import tensorflow as tf

    from bertlayers.tasks import TextEmbedder

    texts = [str(t) for t in REFERENCE["qwen3_embedding.texts"]]
    embedder = TextEmbedder.from_checkpoint(os.path.join(FIXTURES, "decoder_families", name))
    start, side = PROMPTED[name]
    assert embedder.prompts["query"].startswith(start)
    np.testing.assert_allclose(embedder.encode(texts), REFERENCE[f"{name}.default"], atol=ATOL)
    np.testing.assert_allclose(embedder.encode(texts, prompt_name="query"), REFERENCE[f"{name}.query"], atol=ATOL)
    packed = embedder.packer(texts)
    last = 0 if side == "left" else -1
    assert (packed["padding_mask"][:, -1 - last] == 1).all() and (packed["padding_mask"][:, last] == 0).any()
    # Cut as encode cuts (Qwen3's instruction is longer than the 32 tokens here), its end token kept.
    paths = embedder.export(str(tmp_path / "savedmodels"), name, truncate=True)
    embed = tf.saved_model.load(paths[f"{name}_text"]).signatures["embed"]
    for prompt in ("query", ""):
        served = embed(text=tf.constant(texts), prompt_name=tf.constant(prompt), dimensions=tf.constant(0))
        expected = REFERENCE[f"{name}." + (prompt or "default")]
        np.testing.assert_allclose(served["embedding"].numpy(), expected, atol=ATOL)


@pytest.mark.slow(reason="an LLM reranker exported and served as text in (its SavedModels written and loaded)")
def test_a_qwen3_reranker_folder_scores_pairs_as_its_model_card_and_serves_them_prompted(tmp_path):
    """Qwen3-Reranker's way (its model card, recorded with transformers 5.24): each pair formatted
    under the instruction, its ids between the prompt's prefix and suffix ids (the pair cut from its
    end where the row is full, the prefix and suffix kept), padded on the left; the score the
    softmax of the two answers' logits at the last token. The same ids, the same scores within 1e-5,
    and the text SavedModel's pair signature answers the same, the prompt applied in the graph."""
    import shutil

    import tensorflow as tf

    from bertlayers.tasks import TextReranker

    folder = shutil.copytree(_folder("qwen3_causal_lm"), tmp_path / "reranker")
    with open(folder / "config.json") as f:
        config = json.load(f)
    with open(folder / "config.json", "w") as f:  # as recorded: the prompt alone takes 84 positions
        json.dump({**config, "max_position_embeddings": 256}, f)
    shutil.copy(_folder("qwen3_tokenizer.json"), folder / "tokenizer.json")
    with open(folder / "tokenizer_config.json", "w") as f:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "pad_token": "<|endoftext|>", "padding_side": "left"}, f)
    pairs = list(zip(*(map(str, REFERENCE[f"qwen3_reranker.{key}"]) for key in ("queries", "documents"))))
    # "yes" and "no" are not pieces of the fixture's vocabulary (a ValueError names them); "y" and "n" were recorded.
    with pytest.raises(ValueError, match="the tokenizer has no piece 'yes'"):
        TextReranker.from_checkpoint(str(folder), sequence_length=192)
    reranker = TextReranker.from_checkpoint(str(folder), sequence_length=192, answers=("y", "n"))
    assert reranker.prompt.instruction.startswith("Given a web search query")
    inputs, mask = reranker.inputs(pairs), REFERENCE["qwen3_reranker.padding_mask"]
    np.testing.assert_array_equal(inputs["padding_mask"], mask)
    np.testing.assert_array_equal(inputs["token_ids"][mask == 1], REFERENCE["qwen3_reranker.token_ids"][mask == 1])
    scores = REFERENCE["qwen3_reranker.score"]
    np.testing.assert_allclose(reranker.predict(pairs), scores, atol=ATOL)
    reranker.save(str(tmp_path / "reranker.keras"))  # its prompt and answers kept with the model
    again = TextReranker.load(str(tmp_path / "reranker.keras"))
    assert again.prompt == reranker.prompt and again.sequence_length == 192
    np.testing.assert_allclose(again.predict(pairs), scores, atol=ATOL)
    # Cut as `predict` cuts (one pair is longer than the row).
    paths = reranker.export(str(tmp_path / "savedmodels"), "reranker", truncate=True)
    served = tf.saved_model.load(paths["reranker_text"])
    queries, documents = (tf.constant([p[i] for p in pairs]) for i in (0, 1))
    for signature in ("text_pair", "serving_default"):
        answer = served.signatures[signature](text_a=queries, text_b=documents)
        np.testing.assert_allclose(answer["score"].numpy(), scores, atol=ATOL)
    np.testing.assert_allclose(answer["logit"].numpy(), np.log(scores / (1 - scores)), atol=1e-4)
    with pytest.raises(ValueError, match="instruction and answers are an LLM reranker's"):
        TextReranker.from_checkpoint(_folder("qwen3_classifier"), instruction="Find it")
