"""Bad input at every public entry point: a clear error of a documented type that names the
input (file and line, field, tensor), never a crash deep in a graph, silently merged or
invented data, or stale state; and the good input beside each bad one still works.

(The SavedModel signatures' battery is in test_export.py, beside the exported models.)
"""

import json
import os
import re
import shutil
import zipfile

import numpy as np
import pytest
import tensorflow as tf
from pretraining_fixtures import PREDICTIONS, SEQ

from bertlayers.convert import load_model_file
from bertlayers.families.bert import BertEncoder
from bertlayers.pretraining_data.corpus import read_corpus
from bertlayers.pretraining_data.tfrecords import check_tfrecords, serialize_example
from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining
from bertlayers.task_data.classification import LabelMap, read_text_examples, regression_targets
from bertlayers.task_data.ner import read_conll
from bertlayers.task_data.squad import read_squad
from bertlayers.tokenizers.tokenizer import check_vocabulary_fits, load_vocabulary

TINY = dict(
    vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16
)


def write(path, content):
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
        f.write(content)
    return str(path)


# --- The encoder's call ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder(**TINY)


def good_inputs(batch=2, length=8):
    return {
        "token_ids": np.full((batch, length), 5, "int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


def changed(**changes):
    return {**good_inputs(), **changes}


ENCODER_BATTERY = [
    ("float ids", changed(token_ids=np.full((2, 8), 5.7, "float32")), TypeError, "token_ids must be an integer tensor"),
    (
        "rank 1",
        {k: v[0] for k, v in good_inputs().items()},
        ValueError,
        r"token_ids must have rank 2 \(\[batch, seq\]\), got shape \(8,\)",
    ),
    ("too long", good_inputs(length=40), ValueError, "longer than the maximum 16"),
    (
        "negative id",
        changed(token_ids=np.full((2, 8), -1, "int32")),
        ValueError,
        r"token_ids holds -1, outside \[0, 100\)",
    ),
    (
        "id past the vocabulary",
        changed(token_ids=np.full((2, 8), 100, "int32")),
        ValueError,
        r"token_ids holds 100, outside \[0, 100\)",
    ),
    ("huge id", changed(token_ids=np.full((2, 8), 2**31 - 1, "int32")), ValueError, r"token_ids holds 2147483647"),
    (
        "segment id 2",
        changed(segment_ids=np.full((2, 8), 2, "int32")),
        ValueError,
        r"segment_ids holds 2, outside \[0, 2\) \(type_vocab_size\)",
    ),
    (
        "mask of another length",
        changed(padding_mask=np.ones((2, 6), "int32")),
        ValueError,
        "padding_mask and token_ids must have the same shape",
    ),
    (
        "segments of another batch",
        changed(segment_ids=np.zeros((3, 8), "int32")),
        ValueError,
        "segment_ids and token_ids must have the same shape",
    ),
]


@pytest.mark.parametrize("case, inputs, error, message", ENCODER_BATTERY, ids=[c[0] for c in ENCODER_BATTERY])
def test_encoder_call_names_the_bad_input(encoder, case, inputs, error, message):
    with pytest.raises(error, match=message):
        encoder(inputs)
    outputs = encoder(good_inputs())  # and the good input beside it works
    assert outputs["sequence_output"].shape == (2, 8, 16)


def test_encoder_in_a_graph_checks_ranges_and_shapes(encoder):
    """`predict` checks the batch on the host before the traced step; inside a traced graph (unknown
    batch), the checks are assertions on the data."""
    with pytest.raises(ValueError, match=r"token_ids holds 100, outside \[0, 100\)"):
        encoder.predict(changed(token_ids=np.full((2, 8), 100, "int32")), verbose=0)
    with pytest.raises(ValueError, match=r"segment_ids holds -3, outside \[0, 2\)"):
        encoder.predict(changed(segment_ids=np.full((2, 8), -3, "int32")), verbose=0)
    traced = tf.function(
        lambda x: encoder(x)["pooled_output"],
        input_signature=[{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in good_inputs()}],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"token_ids holds values outside \[0, 100\)"):
        traced(changed(token_ids=np.full((2, 8), 100, "int32")))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"segment_ids holds values outside \[0, 2\)"):
        traced(changed(segment_ids=np.full((2, 8), -3, "int32")))
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding_mask and token_ids must have the same shape"):
        traced(changed(padding_mask=np.ones((2, 5), "int32")))
    left = good_inputs()["padding_mask"].copy()
    left[1] = [0, 0, 1, 1, 1, 1, 1, 1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="starts with padding"):
        traced(changed(padding_mask=left))
    assert traced(good_inputs()).shape == (2, 16)
    assert encoder(good_inputs(batch=0))["pooled_output"].shape == (0, 16)


# --- Classification data ----------------------------------------------------------------------


def test_tsv_quotes_are_text_and_every_row_stays_a_row(tmp_path):
    rows = ['"A review that opens with a quote\t1'] + [f"review {i}\t{i % 2}" for i in range(15)]
    path = write(tmp_path / "train.tsv", "text\tlabel\n" + "\n".join(rows) + "\n")
    examples = read_text_examples(path)
    assert len(examples) == 16  # was 11: the quote swallowed the rows after it
    assert examples[0].text_a == '"A review that opens with a quote' and examples[0].where == f"{path}:2"
    assert examples[-1].where == f"{path}:17"


CLASSIFICATION_BATTERY = [
    (
        "stray comma",
        "x.csv",
        "text,label\ngood,1\nbad, really bad,0\nok,1\n",
        r"x\.csv:3: 3 fields, but the header has 2",
    ),
    (
        "unclosed quote",
        "x.csv",
        'text,label\ngood,1\n"never closed,0\nok,1\nfine,0\n',
        r"x\.csv:3: the row starting here does not parse as CSV",
    ),
    ("stray tab", "x.tsv", "text\tlabel\ngood\t1\nbad\tvery\t0\n", r"x\.tsv:3: 3 fields, but the header has 2"),
    (
        "undecodable",
        "x.tsv",
        b"text\tlabel\ngood\t1\n\xff\xfebad\t0\n",
        r"x\.tsv:3: not valid UTF-8 \(byte 0xff at column 1\)",
    ),
    ("empty file", "x.csv", "", r"x\.csv holds no examples"),
    ("header only", "x.tsv", "text\tlabel\n", r"x\.tsv holds no examples"),
    ("missing column", "x.csv", "sentence,label\na,1\n", r"x\.csv:2: no column 'text'"),
    ("empty text", "x.csv", "text,label\n ,1\n", r"x\.csv:2: empty text in column 'text'"),
    ("no label", "x.csv", "text,label\na,\n", r"x\.csv:2: no label in column 'label'"),
    (
        "not an object",
        "x.jsonl",
        '{"text": "a", "label": 1}\n[1, 2]\n',
        r"x\.jsonl:2: expected a JSON object, got list",
    ),
    ("number as text", "x.jsonl", '{"text": 5, "label": 1}\n', r"x\.jsonl:1: column 'text' holds a int, not a text"),
    ("broken JSON", "x.jsonl", '{"text": "a", "label": 1}\n{"text": \n', r"x\.jsonl:2: not valid JSON"),
    ("unknown extension", "x.txt", "text,label\na,1\n", "cannot tell the format from the extension"),
]


@pytest.mark.parametrize(
    "case, name, content, message", CLASSIFICATION_BATTERY, ids=[c[0] for c in CLASSIFICATION_BATTERY]
)
def test_classification_reader_names_file_and_line(tmp_path, case, name, content, message):
    with pytest.raises(ValueError, match=message):
        read_text_examples(write(tmp_path / name, content))


def test_quoted_csv_fields_and_labels(tmp_path):
    path = write(tmp_path / "ok.csv", 'text,label\n"bad, really bad",0\n"two\nlines",1\nplain,1 \n')
    examples = read_text_examples(path)
    assert [e.text_a for e in examples] == ["bad, really bad", "two\nlines", "plain"]
    assert [e.where for e in examples] == [f"{path}:2", f"{path}:3", f"{path}:5"]  # the line each row starts on
    assert LabelMap(e.label for e in examples).labels == ["0", "1"]  # "1 " is class "1"
    with pytest.raises(ValueError, match=r"one\.csv has 1 label value\(s\) \['1'\]; classification needs at least two"):
        LabelMap(
            (e.label for e in read_text_examples(write(tmp_path / "one.csv", "text,label\na,1\nb,1\n"))),
            source="one.csv",
        )
    with pytest.raises(ValueError, match=r"r\.csv:3: regression label 'high' is not a number"):
        regression_targets(read_text_examples(write(tmp_path / "r.csv", "text,label\na,0.5\nb,high\n")))


# --- NER, SQuAD, corpora, vocabularies ----------------------------------------------------------


def test_conll_reader(tmp_path):
    with pytest.raises(ValueError, match=r"n\.txt:2: not valid UTF-8"):
        read_conll(write(tmp_path / "n.txt", b"Paris B-loc\n\xc3( O\n"))
    with pytest.raises(ValueError, match=r"n\.txt:2: expected a word and a tag"):
        read_conll(write(tmp_path / "n.txt", "Paris B-loc\nlonely\n"))
    with pytest.raises(ValueError, match=r"n\.txt holds no sentences"):
        read_conll(write(tmp_path / "n.txt", "\n\n"))
    assert read_conll(write(tmp_path / "n.txt", "Paris B-loc\nis O\n\nOK O\n")) == [
        [("Paris", "B-loc"), ("is", "O")],
        [("OK", "O")],
    ]
    # CoNLL-2003: -DOCSTART- separates documents and is no sentence; four columns on every line.
    conll2003 = (
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n-DOCSTART- -X- -X- O\nPeter NNP B-NP B-PER\n"
    )
    assert read_conll(write(tmp_path / "c.txt", conll2003)) == [
        [("EU", "B-ORG"), ("rejects", "O")],
        [("Peter", "B-PER")],
    ]
    with pytest.raises(ValueError, match=r"c\.txt:4: 3 columns where line 3 has 4 \('rejects VBZ B-VP'\)"):
        read_conll(write(tmp_path / "c.txt", conll2003.replace("B-VP O", "B-VP")))  # its tag column gone
    assert read_conll(write(tmp_path / "t.txt", "Paris\tB-loc\t\nis\tO\n")) == [[("Paris", "B-loc"), ("is", "O")]]
    with pytest.raises(ValueError, match=r"t\.txt:1: 'New York': a column holds a space or is empty"):
        read_conll(write(tmp_path / "t.txt", "New York\tB-LOC\n"))  # not the word "New"


def squad_file(**question):
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 0}], **question}
    qa = {k: v for k, v in qa.items() if v is not None}
    return json.dumps({"data": [{"paragraphs": [{"context": "Paris is big.", "qas": [qa]}]}]})


SQUAD_BATTERY = [
    ("empty file", "", r"s\.json:1: not valid JSON"),
    ("no data", "{}", r"s\.json \(top level\): no 'data' field"),
    ("no questions", '{"data": []}', r"s\.json holds no questions"),
    ("no question text", squad_file(question=None), r"question q1: no 'question' field"),
    (
        "string offset",
        squad_file(answers=[{"text": "Paris", "answer_start": "0"}]),
        r"question q1: 'answer_start' must be of type int",
    ),
    (
        "wrong offset",
        squad_file(answers=[{"text": "Paris", "answer_start": 3}]),
        r"question q1: answer 'Paris' is not at character 3",
    ),
    ("no answer", squad_file(answers=[]), r"question q1 has no answer and is not marked is_impossible"),
    (
        "context not text",
        json.dumps({"data": [{"paragraphs": [{"context": None, "qas": []}]}]}),
        r"data\[0\]\.paragraphs\[0\]: 'context' must be of type str",
    ),
    ("undecodable", b'{"data": [\n\xff]}', r"s\.json:2: not valid UTF-8"),
    (
        "is_impossible a string",
        squad_file(is_impossible="false"),
        r"question q1: 'is_impossible' must be of type bool, got 'false'",
    ),
    (
        "negative offset",
        squad_file(answers=[{"text": "big", "answer_start": -4}]),
        r"question q1: answer_start -4 .* outside its context",
    ),
    ("empty answer", squad_file(answers=[{"text": "", "answer_start": 0}]), r"question q1: an answer's text is empty"),
    (
        "duplicate ids",
        json.dumps(
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "Paris is big.",
                                "qas": [
                                    {
                                        "id": "q1",
                                        "question": "Where?",
                                        "answers": [{"text": "Paris", "answer_start": 0}],
                                    },
                                    {"id": "q1", "question": "How?", "answers": [{"text": "big", "answer_start": 9}]},
                                ],
                            }
                        ]
                    }
                ]
            }
        ),
        r"question q1 appears twice \(at data\[0\]\.paragraphs\[0\]\.qas\[0\] and data\[0\]\.paragraphs\[0\]\.qas\[1\]\)",
    ),
]


@pytest.mark.parametrize("case, content, message", SQUAD_BATTERY, ids=[c[0] for c in SQUAD_BATTERY])
def test_squad_reader_names_where(tmp_path, case, content, message):
    with pytest.raises(ValueError, match=message):
        read_squad(write(tmp_path / "s.json", content))
    assert len(read_squad(write(tmp_path / "s.json", squad_file()))) == 1


def test_corpus_and_vocabulary_errors(tmp_path):
    for name, content in (("c.txt", ""), ("c.txt", "\n\n  \n"), ("c.jsonl", '{"text": ""}\n')):
        with pytest.raises(ValueError, match=rf"{name.replace('.', '[.]')} holds no text"):
            read_corpus(write(tmp_path / name, content))
    with pytest.raises(ValueError, match=r"c\.txt:3: not valid UTF-8 \(byte 0xe9"):
        read_corpus(write(tmp_path / "c.txt", "One sentence.\nTwo.\nCaf\xe9".encode("latin-1")))
    with pytest.raises(ValueError, match=r"c\.jsonl:1: field 'text' holds a list"):
        read_corpus(write(tmp_path / "c.jsonl", '{"text": ["a"]}\n'))
    assert read_corpus(write(tmp_path / "c.txt", "One.\nTwo.\n\nThree.\n")) == [["One.", "Two."], ["Three."]]
    vocabulary = write(tmp_path / "vocab.txt", "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]) + "\n")
    assert len(check_vocabulary_fits(vocabulary, 6)) == 6
    with pytest.raises(ValueError, match="has 6 tokens, but the model's token embedding has 30522 rows"):
        check_vocabulary_fits(vocabulary, 30522)
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        load_vocabulary(write(tmp_path / "bad.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"))


# --- Pretraining records and runs -------------------------------------------------------------


def test_records_with_ids_past_the_vocabulary_are_refused(tmp_path, corpus):
    assert sum(check_tfrecords(corpus["files"], SEQ, PREDICTIONS, vocabulary_size=1000).values()) > 0
    with pytest.raises(ValueError, match=r"feature input_ids holds \d+, outside \[0, 500\) \(the vocabulary size\)"):
        check_tfrecords(corpus["files"], SEQ, PREDICTIONS, vocabulary_size=500)
    path = str(tmp_path / "bad.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(serialize_example([2, 5, 3], [0, 0, 2], [1], [5], 0, SEQ, PREDICTIONS))
    with pytest.raises(ValueError, match=r"bad\.tfrecord: feature segment_ids holds 2, outside \[0, 2\)"):
        check_tfrecords([path], SEQ, PREDICTIONS, vocabulary_size=1000)
    corrupt = write(tmp_path / "corrupt.tfrecord", open(corpus["files"][0], "rb").read()[:-7])
    with pytest.raises(ValueError, match=r"corrupt\.tfrecord is corrupt after \d+ records"):
        check_tfrecords([corrupt], SEQ, PREDICTIONS)


def run_config(shared, output_dir, **changes):
    values = dict(
        output_dir=str(output_dir),
        vocabulary=shared["vocabulary"],
        corpus=shared["corpus"],
        corpus_format="bert",
        sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        batch_size=4,
        num_train_steps=2,
        checkpoint_every=1,
        dupe_factor=1,
        verbose=0,
    )
    values.update(changes)
    return PretrainingConfig(**values)


def test_runs_honour_or_refuse_changed_inputs_and_settings(corpus, tmp_path):
    source = open(corpus["corpus"], encoding="utf-8").read()
    text = write(tmp_path / "corpus.txt", "")
    output = tmp_path / "run"
    # An empty corpus fails by name, and leaves nothing that a fixed corpus would be mistaken for.
    with pytest.raises(ValueError, match=r"corpus\.txt holds no text"):
        run_pretraining(run_config(corpus, output, corpus=text))
    write(text, source)
    assert run_pretraining(run_config(corpus, output, corpus=text))["steps"] == 2
    # A finished run rerun with the same settings trains nothing more; with others it is refused.
    assert run_pretraining(run_config(corpus, output, corpus=text))["steps"] == 2
    for change, message in (
        ({"num_train_steps": 4}, "num_train_steps: 2 then, 4 now"),
        ({"checkpoint_every": 2}, "checkpoint_every: 1 then, 2 now"),
        ({"preset": "bert_mini"}, "preset: 'bert_tiny' then, 'bert_mini' now"),
    ):
        with pytest.raises(ValueError, match=rf"holds a run made with other settings \({message}\)"):
            run_pretraining(run_config(corpus, output, corpus=text, **change))
    # An edited corpus is not mistaken for the cached data made from the old one.
    write(text, source.replace("the", "a"))
    with pytest.raises(ValueError, match=r"holds data made from other inputs \(they differ in \['corpus_sha256'\]"):
        run_pretraining(run_config(corpus, output, corpus=text))


def test_corrupt_model_files_are_named(tmp_path, encoder):
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    assert load_model_file(path).config.vocabulary_size == 100
    truncated = write(tmp_path / "truncated.keras", open(path, "rb").read()[:1000])
    with pytest.raises(ValueError, match=r"truncated\.keras is not a \.keras archive \(corrupt or truncated"):
        load_model_file(truncated)
    with zipfile.ZipFile(tmp_path / "partial.keras", "w") as archive:
        archive.writestr("config.json", "{}")
    with pytest.raises(
        ValueError, match=r"partial\.keras is not a complete \.keras archive: it lacks \['model\.weights\.h5'\]"
    ):
        load_model_file(str(tmp_path / "partial.keras"))
    with pytest.raises(FileNotFoundError, match="No model file at"):
        load_model_file(str(tmp_path / "missing.keras"))


# --- Second round: values that used to pass silently --------------------------------------------


@pytest.mark.parametrize("value", [2, 7, -1, 255])
def test_padding_mask_values_other_than_0_and_1_are_refused(encoder, value):
    mask = good_inputs()["padding_mask"].copy()
    mask[0, :3] = value
    with pytest.raises(ValueError, match=rf"padding_mask holds {value}: it must be 1 at real tokens and 0 at padding"):
        encoder(changed(padding_mask=mask))
    with pytest.raises(ValueError, match=rf"padding_mask holds {value}: it must be 1 at real tokens and 0 at padding"):
        encoder.predict(changed(padding_mask=mask), verbose=0)
    good = changed(padding_mask=np.where(mask != 0, 1, 0).astype("int32"))
    np.testing.assert_allclose(
        encoder.predict(good, verbose=0)["pooled_output"], encoder(good)["pooled_output"], atol=1e-5
    )


def family_encoders():
    from bertlayers.families.electra import electra_encoders
    from bertlayers.families.xlnet import XLNetEncoder
    from bertlayers.networks import EncoderConfig

    config = EncoderConfig(**TINY)
    return {
        "bert": BertEncoder(**TINY),
        "electra": electra_encoders(config, 0.5)[0],
        "xlnet": XLNetEncoder.from_encoder_config(config.replace(architecture="xlnet", type_vocab_size=3)),
    }


def test_rows_without_tokens_and_empty_sequences_are_refused_in_every_family():
    for family, model in family_encoders().items():
        no_tokens = changed(padding_mask=np.array([[1] * 8, [0] * 8], "int32"))
        with pytest.raises(ValueError, match="padding_mask row 1 has no real token"):
            model(no_tokens)
        with pytest.raises(ValueError, match="padding_mask row 1 has no real token"):
            model.predict(no_tokens, verbose=0)
        with pytest.raises(ValueError, match="padding_mask has sequence length 0"):
            model({k: v[:, :0] for k, v in good_inputs().items()})
        assert model(good_inputs())["sequence_output"].shape == (2, 8, 16), family


def test_non_finite_weights_are_refused_when_loaded(tmp_path, encoder):
    import os
    import shutil

    from safetensors.numpy import load_file, save_file

    from bertlayers.convert import load_encoder
    from bertlayers.convert.weight_map import CheckpointMismatchError

    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    for source in (os.path.join("electra_tiny", "discriminator"), "xlnet_tiny"):
        folder = tmp_path / source.replace(os.sep, "_")
        shutil.copytree(os.path.join(fixtures, source), folder)
        assert load_encoder(str(folder)) is not None
        tensors = load_file(str(folder / "model.safetensors"))
        name = sorted(k for k in tensors if "layer_norm" in k.lower() or "LayerNorm" in k)[0]
        tensors[name] = tensors[name].copy()
        tensors[name].flat[0], tensors[name].flat[1] = np.nan, np.inf
        save_file(tensors, str(folder / "model.safetensors"))
        tail = re.escape(".".join(name.split(".")[-2:]))  # the loaders drop the model-type prefix
        with pytest.raises(CheckpointMismatchError, match=rf"not finite[^\n]*\n  \S*{tail}: 1 NaN, 1 Inf of"):
            load_encoder(str(folder))
    path = str(tmp_path / "nan.keras")
    encoder.save(path)
    broken = BertEncoder.from_config(encoder.get_config())
    weights = encoder.get_weights()
    weights[0] = weights[0].copy()
    weights[0][0, 0] = np.nan
    broken.set_weights(weights)
    broken.save(str(tmp_path / "broken.keras"))
    with pytest.raises(
        ValueError,
        match=r"(?s)broken\.keras holds weights that are not finite.*token_embedding/embeddings: 1 NaN, 0 Inf",
    ):
        load_model_file(str(tmp_path / "broken.keras"))
    assert load_model_file(path).config.vocabulary_size == 100


def test_labels_one_number_two_ways_and_non_finite_targets(tmp_path):
    rows = [{"text": "good", "label": 1}, {"text": "fine", "label": 1.0}, {"text": "bad", "label": 0}]
    path = write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    examples = read_text_examples(path)
    assert LabelMap(e.label for e in examples).labels == ["0", "1"]  # JSON's 1 and 1.0: one class
    csv_path = write(tmp_path / "d.csv", "text,label\ngood,1\nfine,1.0\nbad,0\n")
    with pytest.raises(ValueError, match=r"writes one number as different labels \('1' and '1\.0'\)"):
        LabelMap(e.label for e in read_text_examples(csv_path))
    for label in ("NaN", "inf", "-Infinity"):
        bad = write(tmp_path / "r.csv", f"text,label\ngood,0.5\nbad,{label}\n")
        with pytest.raises(ValueError, match=rf"r\.csv:3: regression label '{label}' is not a finite number"):
            regression_targets(read_text_examples(bad))
    with pytest.raises(ValueError, match=r"d\.jsonl:2: the key 'label' is given twice in one object; keep one"):
        read_text_examples(
            write(tmp_path / "d.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0, "label": 1}\n')
        )
    with pytest.raises(ValueError, match=r"d\.jsonl:2: label nan in column 'label' is not a finite number"):
        read_text_examples(write(tmp_path / "d.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n'))
    assert regression_targets(read_text_examples(write(tmp_path / "r.csv", "text,label\ngood,0.5\nbad,-2\n")))[
        :, 0
    ].tolist() == [0.5, -2]


RECIPE_OPTIONS = [
    (
        "electra",
        {"generator_fraction": "0"},
        r"generator_fraction of recipe 'electra' must be a float with 0 < value <= 1",
    ),
    ("electra", {"generator_fraction": "-1"}, "generator_fraction"),
    ("electra", {"generator_fraction": "1.5"}, "generator_fraction"),
    (
        "electra",
        {"discriminator_weight": "-1"},
        r"discriminator_weight of recipe 'electra' must be a float with 0 < value",
    ),
    ("electra", {"discriminator_weight": "nan"}, "discriminator_weight"),
    ("electra", {"temperature": "0"}, "temperature"),
    ("xlnet", {"perm_size": "-4"}, r"perm_size of recipe 'xlnet' must be an int with 0 <= value"),
    ("xlnet", {"perm_size": "2.5"}, "perm_size"),
    ("xlnet", {"clamp_len": "-2"}, "clamp_len"),
    ("spanbert", {"max_span_length": "0"}, "max_span_length"),
]


@pytest.mark.parametrize("recipe, options, message", RECIPE_OPTIONS)
def test_recipe_options_out_of_range_are_refused(recipe, options, message):
    from bertlayers.families.recipes import get_recipe

    with pytest.raises(ValueError, match=message):
        PretrainingConfig(recipe=recipe, options=options)
    good = {name: option.default for name, option in get_recipe(recipe).options.items()}
    assert get_recipe(recipe).resolved_options({k: str(v) for k, v in good.items()}) == good


def test_run_settings_out_of_range_are_refused():
    for change, message in (
        ({"learning_rate": float("nan")}, "learning_rate must be a float with 0 < value, got nan"),
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"dropout": 1.0}, r"dropout must be a float with 0 <= value < 1"),
        ({"masked_lm_prob": 0.0}, "masked_lm_prob"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"batch_size": 0}, "batch_size must be an int with 1 <= value"),
    ):
        with pytest.raises(ValueError, match=message):
            PretrainingConfig(**change)
    assert PretrainingConfig(learning_rate="2e-3").learning_rate == 2e-3


def test_electra_pretrainer_refuses_a_weight_or_temperature_that_cannot_train():
    from bertlayers.families.electra import ElectraPretrainer, electra_encoders
    from bertlayers.networks import EncoderConfig

    discriminator, generator = electra_encoders(EncoderConfig(**TINY), 0.5)
    for keywords, message in (
        ({"discriminator_weight": float("nan")}, "discriminator_weight"),
        ({"temperature": 0}, "temperature"),
    ):
        with pytest.raises(ValueError, match=message):
            ElectraPretrainer(discriminator, generator, **keywords)
    with pytest.raises(ValueError, match="generator_fraction must be a float with 0 < value <= 1"):
        electra_encoders(EncoderConfig(**TINY), 0)


def test_a_late_record_of_another_length_names_its_file(tmp_path, corpus):
    path = str(tmp_path / "late.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(3):
            writer.write(serialize_example([2, 5, 3], [0, 0, 0], [1], [5], 0, SEQ, PREDICTIONS))
        writer.write(serialize_example([2, 5, 3], [0, 0, 0], [1], [5], 0, SEQ * 2, PREDICTIONS))
    with pytest.raises(
        ValueError, match=r"late\.tfrecord: a record among records 0\.\.4095 does not parse as the run expects"
    ):
        check_tfrecords([path], SEQ, PREDICTIONS, vocabulary_size=1000)


@pytest.mark.slow
def test_the_pretraining_script_refuses_an_out_of_range_option_in_one_line(tmp_path):
    import os

    from processes import run, script

    output = tmp_path / "run"
    result = run(
        script("pretrain.py", "--recipe", "electra", "--option", "discriminator_weight=-1", "--output_dir", output),
        expect=2,
    )
    assert result.stderr.strip().splitlines()[-1] == (
        "pretrain.py: error: Option discriminator_weight of recipe 'electra' must be a float with 0 < value, got '-1'."
    )
    assert not os.path.exists(output) and "Traceback" not in result.stderr


@pytest.mark.slow
def test_scripts_name_a_squad_file_left_empty_and_a_truncated_teacher(tmp_path):
    from processes import script, start

    impossible = {"id": "q1", "question": "Where?", "answers": [], "is_impossible": True}
    squad = write(
        tmp_path / "only_impossible.json",
        json.dumps({"data": [{"paragraphs": [{"context": "Paris is big.", "qas": [impossible]}]}]}),
    )
    teacher = write(tmp_path / "teacher.keras", b"PK\x03\x04 not a whole archive")
    reviews = write(tmp_path / "reviews.csv", "text,label\ngood film,fresh\nbad film,rotten\n")
    commands = {
        "run_squad.py": ["--train_file", squad, "--predict_file", squad, "--output_dir", str(tmp_path / "squad")],
        "distill.py": [
            "--teacher",
            teacher,
            "--train_file",
            reviews,
            "--eval_file",
            reviews,
            "--output_dir",
            str(tmp_path / "distill"),
        ],
    }
    processes = {name: start(script(name, *args), output=True) for name, args in commands.items()}
    errors = {name: p.communicate(timeout=300)[1] for name, p in processes.items()}
    assert processes["run_squad.py"].returncode == 2
    assert errors["run_squad.py"].strip().splitlines()[-1] == (
        f"error: {squad} holds only unanswerable questions; SQuAD v1.1 mode leaves none (use --version_2_with_negative)."
    )
    assert not (tmp_path / "squad").exists()  # the run's folder, made before the data was read, is gone
    assert processes["distill.py"].returncode != 0
    assert "teacher.keras is not a .keras archive (corrupt or truncated" in errors["distill.py"]


def test_script_flags_are_range_checked_where_parsed(capsys):
    import argparse

    from bertlayers.utils.validation import POSITIVE_INT, flag

    parser = argparse.ArgumentParser(prog="run_squad.py")
    parser.add_argument("--n_best_size", type=flag(POSITIVE_INT), default=20)
    assert parser.parse_args(["--n_best_size", "5"]).n_best_size == 5
    with pytest.raises(SystemExit) as exit:
        parser.parse_args(["--n_best_size", "0"])
    assert exit.value.code == 2
    assert (
        "run_squad.py: error: argument --n_best_size: must be an int with 1 <= value, got 0" in capsys.readouterr().err
    )


# --- Files validated as a whole, against their format's invariants ----------------------------

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize(
    "case, lines, message",
    [
        ("duplicate token", SPECIALS + ["a", "b", "a"], r"vocab\.txt:8: the token 'a' is on line 6 already"),
        (
            "whitespace inside a token",
            SPECIALS + ["a b"],
            r"vocab\.txt:6: the token 'a b' is empty or holds whitespace inside",
        ),
        ("empty line", SPECIALS + ["", "a"], r"vocab\.txt:6: the token '' is empty"),
        ("a space at the end", SPECIALS + ["a", "the "], r"vocab\.txt:7: the token 'the ' ends in whitespace"),
    ],
)
def test_a_vocab_txt_is_checked_whole_and_names_the_line(tmp_path, case, lines, message):
    with pytest.raises(ValueError, match=message):
        load_vocabulary(write(tmp_path / "vocab.txt", "\n".join(lines) + "\n"))
    assert load_vocabulary(write(tmp_path / "vocab.txt", "\n".join(SPECIALS + ["a", "##b"]) + "\n"))[-1] == "##b"


def test_a_byte_order_mark_is_named():
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = write(f"{folder}/vocab.txt", "\ufeff" + "\n".join(SPECIALS) + "\n")
        with pytest.raises(ValueError, match=r"vocab\.txt:1: starts with a UTF-8 byte-order mark"):
            load_vocabulary(path)
        with pytest.raises(ValueError, match=r"data\.csv:1: starts with a UTF-8 byte-order mark"):
            read_text_examples(write(f"{folder}/data.csv", "\ufefftext,label\ngood,1\nbad,0\n"))


@pytest.mark.parametrize(
    "vocabulary, merges, message",
    [
        (
            {"a": 0, "b": 1, "ab": 2},
            "#version: 0.2\n",
            r"merges\.txt holds no merges: every word would be split into single bytes",
        ),
        ({"a": 0, "b": 1, "ab": 2}, "", r"merges\.txt holds no merges"),
        (
            {"a": 0, "b": 1, "ab": 2},
            "a b\na c\n",
            r"merges\.txt:2: the merge 'a c' joins 'c', which .*vocab\.json lacks",
        ),
        ({"a": 0, "b": 0, "ab": 2}, "a b\n", r"vocab\.json: the tokens 'a' and 'b' both have id 0"),
        ({"a": 0, "b": 1, "ab": 3}, "a b\n", r"vocab\.json: ids run from 0 to 3 for 3 tokens \(no token has id 2\)"),
        ({"a": 0, "b": "1", "ab": 2}, "a b\n", r"vocab\.json is not a byte-level BPE vocabulary"),
    ],
)
def test_byte_level_bpe_files_are_checked_whole(tmp_path, vocabulary, merges, message):
    from bertlayers.tokenizers.byte_level_bpe import read_bpe_files

    vocab_json, merges_txt = (
        write(tmp_path / "vocab.json", json.dumps(vocabulary)),
        write(tmp_path / "merges.txt", merges),
    )
    with pytest.raises(ValueError, match=message):
        read_bpe_files(vocab_json, merges_txt)
    good = read_bpe_files(
        write(tmp_path / "vocab.json", '{"a": 0, "b": 1, "ab": 2}'), write(tmp_path / "merges.txt", "a b\n")
    )
    assert good == ({"a": 0, "b": 1, "ab": 2}, [("a", "b")])
    # Read as a model records them (a copy in a temporary folder): the error names the user's folder.
    from bertlayers.tokenizers import ModelTokenizer

    write(tmp_path / "config.json", '{"model_type": "roberta"}')
    write(tmp_path / "vocab.json", json.dumps(vocabulary))
    write(tmp_path / "merges.txt", merges)
    with pytest.raises(ValueError, match=message) as refused:
        ModelTokenizer.from_folder(str(tmp_path)).in_graph()
    assert str(tmp_path) in str(refused.value) and "/tmp/tmp" not in str(refused.value).replace(str(tmp_path), "")


def test_a_lone_surrogate_is_named_with_its_text():
    from bertlayers.tokenizers import model_tokenizer
    from bertlayers.utils.assets import bert_uncased_vocabulary

    packer = model_tokenizer(bert_uncased_vocabulary()).packer(16)
    bad = b"caf\xe9 au lait".decode("utf-8", errors="surrogateescape")
    with pytest.raises(ValueError, match=r"text 1 holds '\\udce9' at character 3, a lone surrogate"):
        packer(["fine", bad])
    with pytest.raises(ValueError, match=r"text 0 is a int \(5\), not a string"):
        packer([5])
    assert packer(["fine", "café au lait"])["token_ids"].shape == (2, 16)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("hidden_dropout_prob", "0.1", r"EncoderConfig\.dropout must be a number, got '0\.1' \(str\)"),
        ("num_hidden_layers", 2.0, r"EncoderConfig\.num_layers must be an integer, got 2\.0"),
        ("tie_word_embeddings", "false", r"tie_word_embeddings must be true or false, got 'false'"),
    ],
)
def test_config_json_fields_of_the_wrong_type_are_refused(tmp_path, key, value, message):
    from bertlayers.convert.huggingface import read_huggingface_folder

    config = {
        "model_type": "bert",
        "vocab_size": 100,
        "num_hidden_layers": 1,
        "hidden_size": 16,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 16,
    }
    write(tmp_path / "config.json", json.dumps({**config, key: value}))
    write(tmp_path / "model.safetensors", b"")
    with pytest.raises(ValueError, match=message):
        read_huggingface_folder(str(tmp_path), "bert")


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "tokenizer_config.json",
            '{"do_lower_case": "false"}',
            r'do_lower_case is "false", not true or false '
            r"\(transformers would read it as True\)",
        ),  # fmt: skip
        ("tokenizer_config.json", '{"do_lower_case": 0}', r"do_lower_case is 0, not true or false"),
        ("tokenizer_config.json", "[]", r"tokenizer_config\.json holds a JSON list, not the object of settings"),
        ("config.json", "null", r"config\.json holds a JSON null, not the object of settings"),
        ("config.json", '"bert"', r"config\.json holds a JSON str"),
        (
            "config.json",
            '{"model_type": "bert", "hidden_size": 16, "hidden_size": 32}',
            r"config\.json: the key 'hidden_size' is given twice in one object",
        ),  # fmt: skip
    ],
)
def test_tokenizer_settings_and_configs_of_the_wrong_kind_are_refused(tmp_path, name, content, message):
    """A hand-written `"do_lower_case": "false"` is true to transformers and would lower-case in one
    place and not another; a config that is no JSON object, or gives a key twice (json.load keeps
    the last), fails by name before anything loads, not deep in a runner."""
    from bertlayers.convert import load_encoder
    from bertlayers.convert.model_files import tokenizer_of
    from bertlayers.tokenizers.checkpoint_tokenizer import checkpoint_tokenizer

    folder = tmp_path / "folder"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "fixtures", "layouts", "bert", "base"), folder)
    write(folder / "vocab.txt", "".join(t + "\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "fine"]))
    write(folder / name, content)
    for read in (checkpoint_tokenizer, tokenizer_of if name == "tokenizer_config.json" else load_encoder):
        with pytest.raises(ValueError, match=message):
            read(str(folder))


def test_a_folder_whose_config_names_another_model_type_is_refused(tmp_path):
    """A BERT folder (vocab.txt, `bert.` tensors) whose config.json says roberta would load as RoBERTa."""
    from safetensors.numpy import save_file

    from bertlayers.convert import load_encoder
    from bertlayers.convert.huggingface import start_loading
    from bertlayers.utils.assets import minilm_path

    folder = tmp_path / "bert_as_roberta"
    folder.mkdir()
    for name in ("vocab.txt", "model.safetensors", "tokenizer_config.json"):
        if os.path.exists(os.path.join(minilm_path(), name)):
            shutil.copy(os.path.join(minilm_path(), name), folder / name)
    config = json.load(open(os.path.join(minilm_path(), "config.json")))
    write(folder / "config.json", json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(
        ValueError,
        match=r"says model_type 'roberta', whose tokenizer is vocab\.json \+ merges\.txt, but .* holds "
        r"vocab\.txt \(a bert / distilbert / electra / gte / nomic_bert checkpoint's\)",
    ):
        load_encoder(str(folder))
    # Tensors under another family's prefix, tokenizer files aside.
    os.remove(folder / "vocab.txt")
    small = {"bert.embeddings.word_embeddings.weight": np.zeros((100, 16), "float32")}
    save_file(small, str(folder / "model.safetensors"))
    write(
        folder / "config.json",
        json.dumps(
            {
                "model_type": "roberta",
                "vocab_size": 100,
                "num_hidden_layers": 1,
                "hidden_size": 16,
                "num_attention_heads": 2,
                "intermediate_size": 32,
                "max_position_embeddings": 18,
            }
        ),
    )
    with pytest.raises(ValueError, match=r"says model_type 'roberta', but its tensors are named bert\.\*"):
        start_loading(str(folder), ("roberta", "xlm-roberta"), "roberta.", BertEncoder, None)
    assert load_encoder(minilm_path()).config.vocabulary_size == 30522  # the real folder as it is


# --- Runs, runner files and scripts --------------------------------------------------------------


def test_a_finished_or_interrupted_run_folder_is_refused_unless_overwritten(tmp_path):
    from bertlayers.runs.output_folder import take_output_folder
    from bertlayers.utils import atomic_files

    finished, interrupted, foreign = tmp_path / "finished", tmp_path / "interrupted", tmp_path / "foreign"
    for folder, files in (
        (finished, ["model.keras", "metrics.json", "history.json"]),
        (interrupted, ["history.json"]),
        (foreign, ["history.json", "thesis.tex"]),
    ):
        folder.mkdir()
        for name in files:
            write(folder / name, "x")
        (folder / "logs").mkdir()
    try:
        with pytest.raises(
            FileExistsError,
            match=r"finished already holds a finished run \(history\.json, logs, metrics\.json, "
            r"model\.keras\); runs here do not resume\. Pass --overwrite",
        ):
            take_output_folder(str(finished), "test run in")
        with pytest.raises(FileExistsError, match="interrupted already holds an interrupted run"):
            take_output_folder(str(interrupted), "test run in")
        assert sorted(os.listdir(finished)) == [
            ".lock",
            "history.json",
            "logs",
            "metrics.json",
            "model.keras",
        ]  # untouched
        take_output_folder(str(finished), "test run in", overwrite=True)
        assert os.listdir(finished) == [".lock"]
        with pytest.raises(FileExistsError, match=r"also holds files no run writes \(thesis\.tex\)"):
            take_output_folder(str(foreign), "test run in", overwrite=True)
        assert sorted(os.listdir(foreign)) == [".lock", "history.json", "logs", "thesis.tex"]
        take_output_folder(str(tmp_path / "new"), "test run in")  # an empty or new folder is taken as ever
    finally:
        for folder in (finished, interrupted, foreign, tmp_path / "new"):
            atomic_files.release(os.path.join(os.path.abspath(folder), ".lock"))


def test_an_operating_system_error_is_one_line_naming_the_path(capsys):
    import errno

    from bertlayers.utils.cli import run_script

    def read_only():
        raise OSError(errno.EROFS, "Read-only file system", "/mnt/ro/run/.lock")

    with pytest.raises(SystemExit) as exit:
        run_script(read_only)
    assert exit.value.code == 1
    assert capsys.readouterr().err == "error: cannot use /mnt/ro/run/.lock: Read-only file system\n"


def test_retrieval_files_group_a_querys_passages_and_training_pairs_must_differ(tmp_path):
    from bertlayers.metrics.ranking import ranking_metrics
    from bertlayers.task_data.retrieval import RetrievalPair, check_training_pairs, retrieval_set

    pairs = [RetrievalPair("capital of france", f"passage {i}") for i in range(3)] + [
        RetrievalPair("river", "passage 3")
    ]
    collection = retrieval_set(pairs)
    assert collection.queries == ["capital of france", "river"] and collection.relevant == [{0, 1, 2}, {3}]
    # A system ranking all of a query's passages first is perfect (rows of their own, it scored 1/3 at best).
    perfect = np.array([[3, 2, 1, 0], [0, 0, 0, 1]], "float32")
    assert ranking_metrics(perfect, collection.relevant)["mrr@10"] == 1.0
    for bad, message in (
        ([pairs[0]], "at least two pairs a batch; got 1 pair"),
        (pairs[:3], "every pair has the same query"),
    ):
        with pytest.raises(ValueError, match=message):
            check_training_pairs(bad, 32, "train.jsonl")
    with pytest.raises(ValueError, match="--batch_size 1"):
        check_training_pairs(pairs, 1, "train.jsonl")
    check_training_pairs(pairs, 32, "train.jsonl")


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"context": "It rained.", "choices": ["It stopped.", "Cats."], "label": true}',
            "label must index the choices",
        ),
        ('{"context": "It rained.", "choices": ["It stopped.", " "], "label": 0}', "choice 1 is empty"),
        ('{"context": "", "choices": ["It stopped.", "Cats."], "label": 0}', "context must be a non-empty string"),
    ],
)
def test_multiple_choice_files_refuse_boolean_labels_and_empty_texts(tmp_path, line, message):
    from bertlayers.task_data.multiple_choice import read_choices

    with pytest.raises(ValueError, match=rf"c\.jsonl:1: {message}"):
        read_choices(write(tmp_path / "c.jsonl", line + "\n"))
    good = '{"context": "It rained.", "choices": ["It stopped.", "Cats."], "label": 1}\n'
    assert read_choices(write(tmp_path / "c.jsonl", good))[0].label == 1


def test_an_input_the_model_lacks_is_refused_by_name(encoder):
    """Keras feeds a dict's values by their sorted names: a `masked_positions` given to a
    classifier would be read as its `padding_mask`."""
    from bertlayers.models import SequenceClassifier

    classifier = SequenceClassifier(encoder, num_classes=2)
    inputs = good_inputs()
    extra = {**inputs, "masked_positions": np.zeros_like(inputs["token_ids"])}
    for call in (classifier, classifier.predict):
        with pytest.raises(
            ValueError, match="no input named 'masked_positions'; it takes padding_mask, segment_ids, token_ids"
        ):
            call(extra)
    assert classifier.predict(inputs, verbose=0)["logits"].shape == (2, 2)


def test_continued_pretraining_names_a_tokenizer_it_cannot_read_yet(tmp_path):
    """`pretrain.py --init` on a checkpoint whose tokenizer is not WordPiece (DeBERTa's spm.model)
    is refused with that tokenizer's files named (it once failed inside its own refusal)."""
    from bertlayers.convert.model_files import _ATTRIBUTE, save_model
    from bertlayers.runs.pretraining import initial_weights
    from bertlayers.tokenizers import ModelTokenizer

    encoder = BertEncoder(**TINY)
    files = (("spm.model", b"x"), ("tokenizer_config.json", b"{}"))
    object.__setattr__(encoder, _ATTRIBUTE, ModelTokenizer(files, "deberta-v2", pad_id=0))  # as recorded, unchecked
    save_model(encoder, str(tmp_path / "encoder.keras"))
    with pytest.raises(ValueError, match=r"this checkpoint's tokenizer is deberta-v2's spm\.model \+ tokenizer_config"):
        initial_weights(str(tmp_path / "encoder.keras"))


def test_a_folder_whose_vocab_txt_and_tokenizer_json_disagree_is_refused(tmp_path):
    """transformers' fast tokenizer reads tokenizer.json, this library vocab.txt: where they are
    different tokenizers (two ids swapped, a token more, another casing) the folder is refused,
    naming the difference; MiniLM's own pair (the same tokenizer twice) reads as before."""
    from bertlayers.tokenizers.checkpoint_tokenizer import checkpoint_tokenizer
    from bertlayers.utils.assets import minilm_path

    folder = tmp_path / "minilm"
    folder.mkdir()
    for name in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(minilm_path(), name), folder / name)
    assert checkpoint_tokenizer(str(folder)).kind == "wordpiece"
    tokens = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    swapped = dict(spec["model"]["vocab"], **{tokens[1996]: 1997, tokens[1997]: 1996})
    cased = dict(spec["normalizer"], lowercase=False)
    for changed, message in (
        (dict(spec, model=dict(spec["model"], vocab=swapped)), r"id 1996 is 'the' in vocab\.txt, 'of' in tokenizer"),
        (
            dict(spec, model=dict(spec["model"], vocab={**spec["model"]["vocab"], "[NOT-IN-VOCAB]": 30522})),
            r"30523 tokens in tokenizer\.json",
        ),
        (dict(spec, normalizer=cased), r"vocab\.txt is read lower-cased .*BertNormalizer keeps the case"),
    ):
        (folder / "tokenizer.json").write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(ValueError, match=r"vocab\.txt and tokenizer\.json are different tokenizers \(" + message):
            checkpoint_tokenizer(str(folder))


@pytest.mark.slow(reason="the real MiniLM loaded twice, from a Hub cache and from its folder")
def test_a_hub_name_loads_from_huggingface_hubs_cache_offline(tmp_path, monkeypatch):
    """Offline, the bundled MiniLM in a Hub cache laid out as huggingface_hub lays it out (its own
    helpers: `repo_folder_name`, `_create_symlink`): "sentence-transformers/all-MiniLM-L6-v2" (also
    as hf://...@main) is that folder wherever a checkpoint is taken; a name not in the cache is one
    line naming the cache; a local folder of a Hub-like name wins."""
    import hashlib
    from pathlib import Path

    from huggingface_hub import constants
    from huggingface_hub.file_download import _create_symlink, repo_folder_name

    from bertlayers.convert import head_pooling, load_checkpoint, load_encoder
    from bertlayers.convert.model_files import tokenizer_of
    from bertlayers.utils.assets import minilm_path

    repo, commit, cache = "sentence-transformers/all-MiniLM-L6-v2", "0123456789abcdef0123456789abcdef01234567", tmp_path
    storage = cache / repo_folder_name(repo_id=repo, repo_type="model")
    for path in Path(minilm_path()).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            pointer = storage / "snapshots" / commit / path.relative_to(minilm_path())
            pointer.parent.mkdir(parents=True, exist_ok=True)
            _create_symlink(str(blob), str(pointer))
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    checkpoint = load_checkpoint(repo)
    expected = load_checkpoint(minilm_path())
    for ours, theirs in zip(checkpoint.encoder.weights, expected.encoder.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert head_pooling(repo) == "mean"  # its 1_Pooling folder came with it
    assert tokenizer_of(f"hf://{repo}@main").tokens == tokenizer_of(minilm_path()).tokens
    assert load_encoder(f"hf://{repo}@main").config == expected.encoder.config

    with pytest.raises(FileNotFoundError) as missing:
        load_encoder("org/absent-model")
    assert str(missing.value) == (
        f"org/absent-model is no local path, and the Hub model org/absent-model is not in the Hugging Face cache "
        f"({cache}) while the Hub cannot be reached (HF_HUB_OFFLINE is set): download it once online, or give its folder."
    )
    with pytest.raises(FileNotFoundError, match="org/absent-model is no local path"):
        PretrainingConfig(output_dir=str(tmp_path / "run"), init="org/absent-model")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "absent-model").mkdir(parents=True)  # a local folder of that name: read as one
    with pytest.raises(FileNotFoundError, match="org/absent-model holds neither a Hugging Face checkpoint"):
        load_encoder("org/absent-model")
    with pytest.raises(FileNotFoundError, match=r"No encoder at .*missing\.keras\.$"):  # a path, no Hub name
        load_encoder(str(tmp_path / "missing.keras"))
