"""RoBERTa, XLM-R, ALBERT, DistilBERT and XLNet folders as users bring them: untied heads saved and
loaded, fine-tuned and served from the folder's own tokenizer files, against transformers' outputs
for the same randomly initialized models (tests/fixtures/record_subword_families.py). Each family's
layouts against transformers: tests/test_layouts.py."""

import os

import numpy as np
import pytest

import bertlayers
from bertlayers.convert import load_encoder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "subword_families.npz"))


def _folder(name):
    return os.path.join(FIXTURES, "subword_families", name)


def _inputs(name):
    return {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}


def _close_at_real_tokens(ours, theirs, mask, atol=1e-4):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=atol, rtol=1e-4)


@pytest.mark.slow
def test_untied_models_save_and_load_with_their_own_output_matrix(tmp_path):
    pretrainer = bertlayers.families.roberta.load_huggingface_roberta(_folder("roberta_untied"))
    inputs = _inputs("roberta_untied")
    positions = np.tile(np.arange(12, dtype="int32"), (3, 1))
    path = str(tmp_path / "untied.keras")
    pretrainer.save(path)
    loaded = bertlayers.convert.load_model_file(path)
    np.testing.assert_allclose(
        loaded({**inputs, "masked_positions": positions})["mlm"],
        pretrainer({**inputs, "masked_positions": positions})["mlm"],
        atol=1e-6,
    )
    embedding = loaded.encoder.token_embedding
    assert not embedding.tie_weights and embedding.reverse_embeddings.shape == (32, 2000)


SERVE_IN_A_FRESH_PROCESS = """
import json, sys
import numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401  (the tokenizers' kernels)
texts = json.loads(sys.argv[1])
answers = {}
for name, path in json.loads(sys.argv[2]).items():
    serve = tf.saved_model.load(path).signatures["serving_default"]
    answers[name] = serve(text=tf.constant(texts))["logits"].numpy().tolist()
print(json.dumps(answers))
"""
FINE_TUNED = ["roberta", "xlm-roberta", "albert", "distilbert", "xlnet"]


def _checkpoint_folder(family, folder, sentences=20000):
    """The fixture model of `family` with tokenizer files of its vocabulary's size beside it
    (trained on `sentences` of the Wikipedia excerpt)."""
    import shutil

    from subword_files import write_tokenizer_folder

    from bertlayers.utils.assets import bert_uncased_vocabulary

    shutil.copytree(_folder(family), folder)
    if family == "distilbert":  # WordPiece: the real vocabulary's first 1,000 entries
        with open(bert_uncased_vocabulary(), encoding="utf-8") as f:
            lines = f.readlines()[:1000]
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
            f.writelines(lines)
        return folder
    files = write_tokenizer_folder(str(folder) + "_tokenizer", family, sentences=sentences)
    for name in os.listdir(files):
        if name != "config.json":
            shutil.copy(os.path.join(files, name), folder)
    return folder


@pytest.fixture(scope="module")
def served_families(tmp_path_factory):
    """Each family: a classifier fine-tuned a few steps on real Rotten Tomatoes snippets from its
    checkpoint folder (its own tokenizer read from the folder), saved, loaded and exported."""
    import keras

    from bertlayers.convert import load_model_file, save_model
    from bertlayers.convert.model_files import tokenizer_of
    from bertlayers.export import export_for_serving
    from bertlayers.models import SequenceClassifier
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    root = tmp_path_factory.mktemp("families")
    snippets = rotten_tomatoes_snippets()
    train, check = snippets[:32], [text for text, _ in snippets[1000:1008]]
    results = {}
    for family in FINE_TUNED:
        folder = _checkpoint_folder(family, str(root / family))
        packer = tokenizer_of(folder).packer(48)
        x = packer([text for text, _ in train])
        y = np.array([label == "fresh" for _, label in train], "int32")
        keras.utils.set_random_seed(0)
        model = SequenceClassifier(load_encoder(folder), 2, label_names=["rotten", "fresh"])
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        history = model.fit(x, {"logits": y}, batch_size=16, epochs=4, verbose=0)
        save_model(model, str(root / f"{family}.keras"))
        loaded = load_model_file(str(root / f"{family}.keras"))
        paths = export_for_serving(
            loaded, family.replace("-", "_"), base_dir=str(root / "savedmodels"), sequence_length=48, truncate=True
        )  # as the packer cuts the long snippets
        expected = loaded.predict(packer(check), verbose=0)["logits"]
        results[family] = (paths[family.replace("-", "_") + "_text"], expected, history.history["loss"])
    return check, results


@pytest.mark.slow
def test_each_family_fine_tunes_and_serves_text_from_its_own_folder(served_families):
    import json

    from processes import python, run

    check, results = served_families
    for family, (_, _, losses) in results.items():
        assert np.isfinite(losses).all() and losses[-1] < losses[0], (family, losses)
    paths = {family: path for family, (path, _, _) in results.items()}
    answers = json.loads(
        run(python(SERVE_IN_A_FRESH_PROCESS) + [json.dumps(check), json.dumps(paths)]).stdout.splitlines()[-1]
    )
    for family, (_, expected, _) in results.items():
        np.testing.assert_allclose(np.array(answers[family]), expected, atol=1e-4, err_msg=family)


# tensorflow-text ops in TF Serving's `ops_lib` (regex_split_ops, normalize_ops,
# sentencepiece_tokenizer, fast_wordpiece_tokenizer, fast_bert_normalizer), bundled since 2.12.
SERVING_TF_TEXT_OPS = {
    "RegexSplitWithOffsets",
    "NormalizeUTF8",
    "SentencepieceOp",
    "SentencepieceTokenizeOp",
    "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets",
}


@pytest.mark.slow
def test_every_family_text_model_uses_only_ops_tf_serving_links(served_families):
    import tensorflow as tf
    from test_export import FORBIDDEN, graph_ops

    _, results = served_families
    core = set(dir(tf.raw_ops))
    for family, (path, _, _) in results.items():
        ops = graph_ops(path)
        assert not ops & FORBIDDEN, family
        assert not ops - core - SERVING_TF_TEXT_OPS, (family, sorted(ops - core - SERVING_TF_TEXT_OPS))


@pytest.mark.slow(reason="three runners (classifier, tagger, SQuAD) from folders")
def test_the_runners_start_from_a_folder_with_its_own_tokenizer(tmp_path, monkeypatch):
    """`--init FOLDER` is all a runner needs: run_classifier from a RoBERTa folder (byte-level
    BPE, `<s> A </s>`), run_ner and run_squad from an XLNet one (SentencePiece, left padding,
    `<cls>` last); each records the folder's tokenizer in its model.keras."""
    import builtins
    import collections
    import csv
    import json

    from processes import run_script

    from bertlayers.convert import load_model_file
    from bertlayers.convert.model_files import recorded_tokenizer
    from bertlayers.task_data.ner import read_conll, write_conll
    from bertlayers.utils.assets import asset_path, rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()
    for name, rows in (("train.csv", snippets[:48]), ("eval.csv", snippets[2000:2016])):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    roberta = _checkpoint_folder("roberta", str(tmp_path / "roberta"))
    common = ("--epochs", 1, "--batch_size", 16, "--sequence_length", 40, "--verbose", 0)
    opened, real_open = collections.Counter(), builtins.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.dirname(os.path.realpath(file)) == os.path.realpath(
            roberta
        ):
            opened[os.path.basename(file)] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    run_script(
        "run_classifier.py",
        "--init",
        roberta,
        "--train_file",
        tmp_path / "train.csv",
        "--eval_file",
        tmp_path / "eval.csv",
        "--output_dir",
        tmp_path / "sentiment",
        *common,
    )
    monkeypatch.undo()
    # The run resolves its tokenizer once: each of the folder's tokenizer files read once.
    assert {name: n for name, n in opened.items() if name not in ("config.json", "model.safetensors")} == {
        "vocab.json": 1,
        "merges.txt": 1,
    }, opened
    assert json.load(open(tmp_path / "sentiment" / "metrics.json"))["eval_examples"] == 16
    assert recorded_tokenizer(load_model_file(str(tmp_path / "sentiment" / "model.keras"))).model_type == "roberta"

    sentences = read_conll(asset_path("wnut16"))
    write_conll(str(tmp_path / "train.conll"), sentences[:48])
    write_conll(str(tmp_path / "eval.conll"), sentences[:16])  # the plumbing is under test: tags the training set knows
    xlnet = _checkpoint_folder("xlnet", str(tmp_path / "xlnet"))
    run_script(
        "run_ner.py",
        "--init",
        xlnet,
        "--train_file",
        tmp_path / "train.conll",
        "--eval_file",
        tmp_path / "eval.conll",
        "--output_dir",
        tmp_path / "tags",
        *common[:4],
        "--sequence_length",
        64,
        "--verbose",
        0,
    )
    metrics = json.load(open(tmp_path / "tags" / "metrics.json"))
    assert metrics["eval_sentences"] == 16 and 0.0 <= metrics["f1"] <= 100.0
    assert recorded_tokenizer(load_model_file(str(tmp_path / "tags" / "model.keras"))).model_type == "xlnet"

    # SQuAD 2.0 from the XLNet folder: windows `Q <sep> C <sep> <cls>`, the null answer at <cls>.
    run_script(
        "run_squad.py",
        "--init",
        xlnet,
        "--output_dir",
        tmp_path / "squad",
        "--epochs",
        1,
        "--batch_size",
        8,
        "--sequence_length",
        160,
        "--verbose",
        0,
        "--version_2_with_negative",
    )
    metrics = json.load(open(tmp_path / "squad" / "metrics.json"))
    assert metrics["total"] == 12 and "no_answer_exact_match" in metrics


@pytest.mark.slow
@pytest.mark.parametrize("family", ["xlm-roberta", "albert"])
def test_load_checkpoint_gives_model_encoder_and_tokenizer_in_one_call(family, tmp_path):
    from bertlayers.convert import load_checkpoint
    from bertlayers.convert.model_files import recorded_tokenizer

    folder = _checkpoint_folder(family, str(tmp_path / family))
    checkpoint = load_checkpoint(folder)
    assert type(checkpoint.model).__name__ == "BertPretrainer" and checkpoint.model.encoder is checkpoint.encoder
    assert recorded_tokenizer(checkpoint.encoder).model_type == family
    inputs = checkpoint.tokenizer.encode(["A fine film.", "Dull."], ["Yes.", "No."], sequence_length=24)
    outputs = checkpoint.encoder(inputs)
    assert outputs["sequence_output"].shape == (2, 24, 32) and np.isfinite(outputs["sequence_output"]).all()
    os.remove(os.path.join(folder, "sentencepiece.bpe.model" if family == "xlm-roberta" else "spiece.model"))
    with pytest.raises(
        FileNotFoundError, match=r"has no (sentencepiece\.bpe|spiece)\.model: a .* checkpoint's tokenizer needs it"
    ):
        load_checkpoint(folder)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "distilbert", "xlnet", "electra"])
def test_sequence_classification_folders_load_as_classifiers(family):
    """transformers' *ForSequenceClassification folders: the head's own summary layer (RoBERTa's
    and ELECTRA's `classifier.dense`, DistilBERT's `pre_classifier`, XLNet's `sequence_summary`,
    BERT's and ALBERT's pooler) as the encoder's pooler, its output layer as the classifier's,
    its `id2label` as the label names."""
    import json

    from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES

    name = f"{family}_classifier"
    folder = _folder(name)
    with open(os.path.join(folder, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    classifier = HUGGINGFACE_FAMILIES[model_type].loader(folder)
    assert type(classifier).__name__ == "SequenceClassifier"
    assert classifier.label_names == ["negative", "neutral", "positive"]
    inputs = _inputs(name)
    logits = classifier(inputs)["logits"]
    np.testing.assert_allclose(np.asarray(logits), REFERENCE[f"{name}.logits"], atol=1e-4, rtol=1e-4)
    _close_at_real_tokens(
        classifier.encoder(inputs)["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"]
    )


@pytest.mark.slow(reason="fine-tunes and exports a SQuAD model of each family")
@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_a_squad_text_model_answers_whole_words_as_the_python_decoder(family, tmp_path):
    """A span predictor on a byte-level BPE or SentencePiece checkpoint, exported with text in:
    the graph packs the family's layout, tokenizes each word as the Python windows do, and
    decodes the answer the Python decoder picks, cut from the context on word boundaries."""
    import tensorflow as tf

    from bertlayers.convert.model_files import tokenizer_of
    from bertlayers.export import export_for_serving
    from bertlayers.models import SpanPredictor
    from bertlayers.task_data.squad import SquadExample, decode_answers, make_windows, read_squad

    folder = _checkpoint_folder(family, str(tmp_path / family))
    model = SpanPredictor(load_encoder(folder))
    paths = export_for_serving(model, "qa", base_dir=str(tmp_path / "savedmodels"), sequence_length=64)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    examples = read_squad(os.path.join(repo, "examples", "data", "squad_mini", "dev-v2.0.json"))[:6]
    contexts = [" ".join(e.context.split()[:12]) for e in examples]  # one window each
    short = [SquadExample(e.qid, e.question, c, [], True) for e, c in zip(examples, contexts)]
    served = tf.saved_model.load(paths["qa_text"]).signatures["serving_default"](
        question=tf.constant([e.question for e in short]), context=tf.constant(contexts)
    )
    features = make_windows(short, tokenizer_of(folder).in_graph(), sequence_length=64)
    keras_logits = model.predict(features.inputs, verbose=0)["start_logits"]
    width = served["start_logits"].shape[1]  # the served batch is cut to its longest request
    real = features.inputs["span_mask"][:, :width] == 1
    np.testing.assert_allclose(served["start_logits"].numpy()[real], keras_logits[:, :width][real], atol=1e-4)
    predictions, _ = decode_answers(
        short, features, served["start_logits"].numpy(), served["end_logits"].numpy(), n_best_size=64
    )
    for i, example in enumerate(short):
        text = served["answer_text"].numpy()[i].decode("utf-8")
        assert text == predictions[example.qid] and text, (family, example.qid)
        start, end = served["answer_start"].numpy()[i], served["answer_end"].numpy()[i]
        assert example.context[start:end] == text
        assert (start == 0 or example.context[start - 1].isspace()) and (
            end == len(example.context) or example.context[end].isspace()
        )


def test_config_readers_name_what_they_cannot_read():
    import bertlayers.families  # noqa: F401  (registers the model_types)
    from bertlayers.convert.huggingface import encoder_config_from_huggingface

    roberta = encoder_config_from_huggingface(
        {
            "model_type": "roberta",
            "vocab_size": 50265,
            "num_hidden_layers": 12,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "max_position_embeddings": 514,
            "pad_token_id": 1,
            "type_vocab_size": 1,
        }
    )
    assert roberta.max_sequence_length == 512 and roberta.type_vocab_size == 1  # positions start after the padding id
    distilbert = encoder_config_from_huggingface(
        {
            "model_type": "distilbert",
            "vocab_size": 30522,
            "n_layers": 6,
            "dim": 768,
            "n_heads": 12,
            "hidden_dim": 3072,
            "tie_word_embeddings": False,
        }
    )
    assert (
        distilbert.type_vocab_size == 0
        and not distilbert.tie_word_embeddings
        and distilbert.pooler_activation == "relu"
    )
    with pytest.raises(ValueError, match=r"lacks required keys: hidden_dim"):
        encoder_config_from_huggingface(
            {"model_type": "distilbert", "vocab_size": 1, "n_layers": 1, "dim": 8, "n_heads": 2}
        )
    with pytest.raises(ValueError, match=r"inner_group_num 2 is not supported"):
        encoder_config_from_huggingface({"model_type": "albert", "inner_group_num": 2})


def test_a_question_answering_text_model_of_a_layout_without_a_leading_token_is_refused_before_writing(tmp_path):
    """XLNet's layout has no token before the text (its `<cls>` ends the row), where the served
    span decoder reads the null answer: the text export says so by the layout, before any file."""
    from bertlayers.convert import load_encoder
    from bertlayers.convert.model_files import tokenizer_of
    from bertlayers.export import export_for_serving
    from bertlayers.models import SpanPredictor

    folder = _checkpoint_folder("xlnet", str(tmp_path / "xlnet"), sentences=3000)  # the layout is what counts
    model = SpanPredictor(load_encoder(folder))
    with pytest.raises(ValueError, match=r"has no token before the text \(it starts \[\], ends \[\d+, \d+\]\)"):
        export_for_serving(model, "squad", base_dir=str(tmp_path / "savedmodels"), vocabulary=tokenizer_of(folder))
    assert not (tmp_path / "savedmodels" / "squad").exists()
