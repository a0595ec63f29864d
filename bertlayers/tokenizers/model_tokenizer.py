"""What a model tokenizes with, as one value: `ModelTokenizer`.

A model records one (`bertlayers.convert.record_tokenizer`); a `.keras` file, a checkpoint folder
and a pretraining run give one back; training packs its texts with it, export builds the served
graph's tokenizer from it, and `save_huggingface` writes its files. Every format is the same type:
a WordPiece `vocab.txt` the library trained or was given (BERT's layout), or a checkpoint's own
tokenizer files (its model_type picks the reader and the layout: `checkpoint_tokenizer`). Training
and serving both tokenize through its `in_graph()` tokenizer.
"""

import dataclasses
import functools
import json
import os

from bertlayers.tokenizers.checkpoint_tokenizer import (
    built_checkpoint_tokenizer,
    fits_rows,
    read_config,
    read_tokenizer_files,
    reads_tokenizer_json,
    tokenizer_settings,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointPacker, CheckpointTokenizer
from bertlayers.tokenizers.input_layout import bert_layout
from bertlayers.tokenizers.tokenizer import check_vocabulary_fits, load_vocabulary
from bertlayers.tokenizers.wordpiece import InGraphTokenizer

VOCABULARY_FILE = "vocab.txt"


@dataclasses.dataclass(frozen=True)
class ModelTokenizer:
    """The tokenizer a model's token ids come from, as its files (frozen: a model records it, a
    `.keras` file stores it, equal files give an equal value).

    Attributes:
      files: ((file name, bytes), ...): a WordPiece vocabulary's `vocab.txt`, or a checkpoint's
        tokenizer files (`TOKENIZER_FILES`).
      model_type: the checkpoint's transformers model_type (it picks the reader and the input
        layout); None for a WordPiece vocabulary in BERT's layout (the library's own runs).
      lowercase: a WordPiece vocabulary's lower-casing (a checkpoint's is in its files).
      pad_id: the checkpoint config's `pad_token_id` (a tokenizer.json's padding id), or None.
      source: where the files were read (errors name it), or None; not part of the value.
    """

    files: tuple
    model_type: str | None = None
    lowercase: bool = True
    pad_id: int | None = None
    source: str | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def wordpiece(cls, tokens, lowercase: bool = True, source: str | None = None) -> "ModelTokenizer":
        """A WordPiece vocabulary (its tokens by id) in BERT's layout."""
        text = "".join(f"{token}\n" for token in tokens)
        return cls(((VOCABULARY_FILE, text.encode("utf-8")),), None, bool(lowercase), source=source)

    @classmethod
    def from_vocab_file(cls, path: str, lowercase: bool = True) -> "ModelTokenizer":
        """The WordPiece `vocab.txt` at `path`, checked line by line (`load_vocabulary`)."""
        return cls.wordpiece(load_vocabulary(path), lowercase, source=path)

    @classmethod
    def from_folder(cls, folder: str) -> "ModelTokenizer | None":
        """A Hugging Face checkpoint folder's tokenizer, or None where it has no tokenizer files:
        its `vocab.txt` read as a WordPiece vocabulary (lower-cased as `tokenizer_config.json`
        says) unless its tokenizer.json is what transformers reads, else its tokenizer files under
        its config's model_type (a folder without config.json: its vocab.txt alone). Each file is
        read once."""
        config = read_config(folder)
        model_type = config.get("model_type", "bert")
        vocabulary = os.path.join(folder, VOCABULARY_FILE)
        if os.path.isfile(vocabulary) and not reads_tokenizer_json(folder, model_type):
            return cls.from_vocab_file(vocabulary, tokenizer_settings(folder).get("do_lower_case", True))
        if not os.path.isfile(os.path.join(folder, "config.json")):
            return None
        files = read_tokenizer_files(folder)
        if not any(name != "tokenizer_config.json" for name, _ in files):
            return None
        return cls(tuple(files), model_type, pad_id=config.get("pad_token_id"), source=folder)

    @property
    def is_wordpiece_vocabulary(self) -> bool:
        """A `vocab.txt` in BERT's layout (what the pretraining data path reads)."""
        return self.model_type is None

    @functools.cached_property
    def tokens(self) -> tuple:
        """A WordPiece vocabulary's tokens by id; a ValueError for a checkpoint's own files."""
        if not self.is_wordpiece_vocabulary:
            raise ValueError(f"{self.describe()} is not a WordPiece vocab.txt: it has no token list to read.")
        return tuple(dict(self.files)[VOCABULARY_FILE].decode("utf-8").splitlines())

    @functools.cached_property
    def pieces(self) -> tuple:
        """The vocabulary's pieces by id, where its files list them: a `vocab.txt` (a WordPiece
        vocabulary's or a checkpoint's), a `tokenizer.json` (its model's vocabulary and added
        tokens) or a byte-level BPE `vocab.json`; a ValueError naming the files otherwise (a
        SentencePiece model's pieces are in its binary proto)."""
        files = dict(self.files)
        if VOCABULARY_FILE in files:
            return tuple(files[VOCABULARY_FILE].decode("utf-8").splitlines())
        by_id = {}
        if "tokenizer.json" in files:
            spec = json.loads(files["tokenizer.json"])
            vocabulary = spec.get("model", {}).get("vocab", {})
            if isinstance(vocabulary, list):  # Unigram: [[piece, score], ...] in id order
                by_id = {i: entry[0] for i, entry in enumerate(vocabulary)}
            else:
                by_id = {int(i): piece for piece, i in vocabulary.items()}
            by_id.update({int(token["id"]): token["content"] for token in spec.get("added_tokens", [])})
        elif "vocab.json" in files:
            by_id = {int(i): piece for piece, i in json.loads(files["vocab.json"]).items()}
        if not by_id:
            raise ValueError(f"{self.describe()} lists no pieces to read (vocab.txt, tokenizer.json or vocab.json).")
        return tuple(by_id.get(i, "") for i in range(max(by_id) + 1))

    def describe(self) -> str:
        """What the tokenizer is, in words (for messages)."""
        if self.is_wordpiece_vocabulary:
            return f"a WordPiece vocab.txt of {len(self.tokens)} tokens"
        return f"{self.model_type}'s {' + '.join(name for name, _ in self.files) or 'own files'}"

    def in_graph(self, vocabulary_size: int | None = None) -> CheckpointTokenizer:
        """The `CheckpointTokenizer` (graph ops and input layout) that training packs texts with and
        a served text model tokenizes with; with `vocabulary_size` (a model's token embedding
        rows), a ValueError unless the tokenizer belongs to that model."""
        if vocabulary_size is not None and self.is_wordpiece_vocabulary:  # one token a row, as Hugging Face's
            check_vocabulary_fits(self.tokens, vocabulary_size, self.source or "the vocabulary")
        tokenizer = _in_graph(self)
        if vocabulary_size is not None and not fits_rows(tokenizer.vocabulary_size, vocabulary_size):
            raise ValueError(
                f"The {self.model_type} tokenizer has {tokenizer.vocabulary_size} tokens, but the model's token "
                f"embedding has {vocabulary_size} rows: the tokenizer belongs to another model."
            )
        return tokenizer

    def packer(self, sequence_length: int) -> CheckpointPacker:
        """Texts (and pair texts) → model inputs at `sequence_length` (`CheckpointPacker`)."""
        return self.in_graph().packer(sequence_length)

    def with_special_tokens(self, contents) -> "ModelTokenizer":
        """This tokenizer with each of `contents` (pieces of its tokenizer.json, or added tokens
        there) split out of the raw text as one special, unnormalized piece: what
        sentence-transformers does to the [Q] / [D] markers of a PyLate or Stanford ColBERT
        checkpoint, which were inserted as ids in training and are prepended as text. A ValueError
        for a tokenizer without a tokenizer.json, or a piece it does not have."""
        files = dict(self.files)
        if "tokenizer.json" not in files:
            raise ValueError(
                f"{self.describe()}: the markers {list(contents)} can only be split out of a tokenizer.json "
                "(save the tokenizer with transformers' save_pretrained, which writes one)."
            )
        spec = json.loads(files["tokenizer.json"])
        vocabulary = spec.get("model", {}).get("vocab", {})
        added = {token["content"]: token for token in spec.get("added_tokens") or []}
        for content in contents:
            index = (
                added[content]["id"]
                if content in added
                else vocabulary.get(content)
                if isinstance(vocabulary, dict)
                else None
            )
            if index is None:
                raise ValueError(
                    f"{self.source or self.describe()}: tokenizer.json has no piece {content!r} to split out."
                )
            token = {"id": int(index), "content": content, "single_word": False, "lstrip": False, "rstrip": False}
            added[content] = {**token, "normalized": False, "special": True}
        spec["added_tokens"] = sorted(added.values(), key=lambda token: token["id"])
        files["tokenizer.json"] = json.dumps(spec, ensure_ascii=False).encode("utf-8")
        return dataclasses.replace(self, files=tuple(files.items()))

    def folder_files(self) -> dict:
        """{file name: bytes} of the tokenizer in a Hugging Face checkpoint folder."""
        if not self.is_wordpiece_vocabulary:
            return dict(self.files)
        import json

        settings = {"do_lower_case": self.lowercase, "tokenizer_class": "BertTokenizer", "model_max_length": 512}
        return {**dict(self.files), "tokenizer_config.json": json.dumps(settings, indent=2).encode("utf-8")}


@functools.lru_cache(maxsize=8)
def _in_graph(tokenizer):
    """The in-graph tokenizer of `tokenizer`, built once: loading, recording, training and export
    each ask for it, and a real vocabulary's tables (50k BPE merges) take a while to build."""
    if not tokenizer.is_wordpiece_vocabulary:
        return built_checkpoint_tokenizer(tokenizer.files, tokenizer.model_type, tokenizer.pad_id, tokenizer.source)
    tokens = list(tokenizer.tokens)
    graph = InGraphTokenizer(tokens, lowercase=tokenizer.lowercase)
    return CheckpointTokenizer(
        graph,
        bert_layout(graph.cls_id, graph.sep_id, graph.pad_id),
        len(tokens),
        "wordpiece",
        truncation=InGraphTokenizer.truncation,
        unknown_id=tokens.index("[UNK]"),
    )


def model_tokenizer(vocabulary: "ModelTokenizer | str | list", lowercase: bool = True) -> ModelTokenizer:
    """A `ModelTokenizer` from what a user hands over: one already, a `vocab.txt` path, or a
    WordPiece vocabulary's tokens (lower-cased as `lowercase` says)."""
    if isinstance(vocabulary, ModelTokenizer):
        return vocabulary
    if isinstance(vocabulary, (str, os.PathLike)):
        return ModelTokenizer.from_vocab_file(os.fspath(vocabulary), lowercase)
    if isinstance(vocabulary, (list, tuple)):
        return ModelTokenizer.wordpiece(vocabulary, lowercase)
    raise TypeError(
        f"A model's tokenizer is a ModelTokenizer, a vocab.txt path or a list of tokens, got a {type(vocabulary).__name__}."
    )
