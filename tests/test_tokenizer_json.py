"""tokenizer.json read into the graph tokenizers: ids equal to the tokenizers library's (its
`Tokenizer.from_file(path).encode(text, pair).ids`) for the three kinds the modern checkpoints ship,
trained here (tests/subword_files.py), on real text and edge cases; what the graph cannot do is
refused by name."""

import json

import numpy as np
import pytest
import tensorflow as tf
from subword_files import (
    JSON_EDGE_CASES,
    JSON_KINDS,
    json_check_sentences,
    real_sentences,
    write_gemma_tokenizer_json,
    write_tokenizer_json,
)

from bertlayers.tokenizers.tokenizer_json import read_tokenizer_json


def _read(path, kind):
    """The file read as its checkpoints' folders have it read: Qwen3's tokenizer.json names no
    padding (its tokenizer_config.json's pad_token does: <|endoftext|>)."""
    pad_id = None
    if kind == "qwen3":
        pad_id = next(
            t["id"] for t in json.load(open(path, encoding="utf-8"))["added_tokens"] if t["content"] == "<|endoftext|>"
        )
    return read_tokenizer_json(path, pad_id=pad_id)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizer_json")
    return {kind: write_tokenizer_json(str(root / f"{kind}.json"), kind) for kind in JSON_KINDS}


@pytest.mark.parametrize(
    "kind",
    # EuroBERT's and Qwen3's byte-level BPE: ModernBERT's case takes its path in the fast tier.
    [
        pytest.param(k, marks=pytest.mark.slow(reason="8 s of real text")) if k in ("eurobert", "qwen3") else k
        for k in JSON_KINDS
    ],
)
def test_ids_equal_the_tokenizers_library_on_real_text_and_edge_cases(files, kind):
    from tokenizers import Tokenizer

    texts = json_check_sentences()
    ours = _read(files[kind], kind).tokenizer.tokenize(tf.constant(texts)).to_list()
    reference = Tokenizer.from_file(files[kind])
    theirs = [encoding.ids for encoding in reference.encode_batch(texts, add_special_tokens=False)]
    assert len(texts) >= 2500
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not differ, [(texts[i], ours[i], theirs[i]) for i in differ[:3]]


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_single_and_pair_layouts_equal_the_tokenizers_library(files, kind):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(files[kind])
    ours = _read(files[kind], kind)
    firsts = ["The cat sat.", "A longer first text, with a comma", ""]
    seconds = ["On the mat", "b", "only the second"]
    for pair in (False, True):
        expected = [
            reference.encode(first, second) if pair else reference.encode(first)
            for first, second in zip(firsts, seconds)
        ]
        ids, segments, mask = ours.layout.pack(
            ours.tokenizer.tokenize(tf.constant(firsts)),
            ours.tokenizer.tokenize(tf.constant(seconds)) if pair else None,
            sequence_length=64,
        )
        for row, encoding in enumerate(expected):
            length = int(np.sum(mask[row]))
            assert list(ids[row][:length].numpy()) == encoding.ids
            if kind == "nomic_bert":  # the only kind whose template gives the pair's second text segment 1
                assert list(segments[row][:length].numpy()) == encoding.type_ids


def test_what_the_graph_cannot_do_is_refused_by_name(files, tmp_path):
    spec = json.load(open(files["modernbert"], encoding="utf-8"))
    cases = {
        "Lowercase": lambda s: s.update(normalizer={"type": "Lowercase"}),
        "byte_fallback": lambda s: s["model"].update(byte_fallback=True),
        "dropout": lambda s: s["model"].update(dropout=0.1),
        "add_prefix_space": lambda s: s["pre_tokenizer"].update(add_prefix_space=True),
        "single_word": lambda s: s["added_tokens"][0].update(single_word=True),
        "Unigram": lambda s: s["model"].update(type="Unigram"),
        "Split pattern": lambda s: s.update(
            pre_tokenizer={
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
                ],
            }
        ),
    }
    for name, change in cases.items():
        changed = json.loads(json.dumps(spec))
        change(changed)
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(ValueError, match=f"{path}.*refused rather than tokenized differently") as raised:
            read_tokenizer_json(str(path))
        assert name.split()[0] in str(raised.value), (name, str(raised.value))
    gemma = json.load(open(files["gemma3"], encoding="utf-8"))
    byte_token = lambda s: s["model"]["vocab"].update({"<0x41>x": s["model"]["vocab"].pop("<0x41>")})  # noqa: E731
    cases = {  # what Gemma's pipeline does not do: Llama-2's prefix, merges ignored, a byte token missing
        "normalizer": lambda s: s.update(
            normalizer={"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, s["normalizer"]]}
        ),
        "ignore_merges": lambda s: s["model"].update(ignore_merges=True),
        "<0x41>": byte_token,
    }
    for name, change in cases.items():
        changed = json.loads(json.dumps(gemma))
        change(changed)
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(changed, ensure_ascii=False), encoding="utf-8")
        with pytest.raises(ValueError, match=f"{path}.*refused rather than tokenized differently") as raised:
            read_tokenizer_json(str(path))
        assert name in str(raised.value), (name, str(raised.value))
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        read_tokenizer_json(str(path))


def test_byte_fallback_pieces_that_run_across_words_are_merged_over_the_whole_text(tmp_path):
    """A Gemma vocabulary trained on whole texts holds pieces with "▁" inside ("s▁t"): the text
    is not cut into words then, and the ids still equal the tokenizers library's."""
    from tokenizers import Tokenizer

    sentences = real_sentences()["wikipedia"]
    path = write_gemma_tokenizer_json(str(tmp_path / "gemma.json"), sentences[:400], 600, split_words=False)
    ours = read_tokenizer_json(path)
    assert not ours.tokenizer.tokenizer.splits_words
    texts = sentences[-15:] + JSON_EDGE_CASES[:3] + ["", "  two  spaces  "]
    theirs = [e.ids for e in Tokenizer.from_file(path).encode_batch(texts, add_special_tokens=False)]
    assert ours.tokenizer.tokenize(tf.constant(texts)).to_list() == theirs
