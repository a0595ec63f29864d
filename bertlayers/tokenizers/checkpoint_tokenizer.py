"""A Hugging Face checkpoint folder's own tokenizer and input layout, read from its files.

    vocab.txt                  WordPiece          BERT, ELECTRA, DistilBERT
    vocab.json + merges.txt    byte-level BPE     RoBERTa
    spiece.model               SentencePiece      ALBERT, XLNet
    sentencepiece.bpe.model    SentencePiece      XLM-R (fairseq's id order)
    tokenizer.json             any of the above   ModernBERT, EuroBERT, GTE, NomicBERT, and any
                                                  folder whose only tokenizer file it is

Each model_type's reader is registered here (`register_checkpoint_tokenizer`); a family
folder registers its own.
"""

import contextlib
import dataclasses
import json
import os
import tempfile

from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import bert_layout
from bertlayers.tokenizers.sentencepiece_model import SentencePiece, read_sentencepiece_model
from bertlayers.tokenizers.tokenizer import load_vocabulary
from bertlayers.tokenizers.tokenizer_json import read_tokenizer_json
from bertlayers.tokenizers.wordpiece import InGraphTokenizer
from bertlayers.utils.text_files import read_json_object

# The files a checkpoint's tokenizer is read from (one family needs some of them).
TOKENIZER_FILES = (
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "spm.model",
    "sentencepiece.bpe.model",
    "tokenizer.json",
    "tokenizer_config.json",
)
# Embedding tables are often padded past the tokenizer's ids to a multiple of 64 rows (GTE's and
# NomicBERT's 30,528 for BERT's 30,522 tokens): rows no id reaches, not another tokenizer.
PADDED_ROWS = 64


def fits_rows(tokens, rows):
    """Whether a tokenizer of `tokens` ids belongs to a token embedding of `rows` rows: as many, or
    rows padded to the next multiple of `PADDED_ROWS`."""
    return tokens == rows or (tokens < rows and rows % PADDED_ROWS == 0 and rows - tokens < PADDED_ROWS)


def read_config(folder: str) -> dict:
    """A checkpoint folder's config.json ({} when it has none), refused by name unless a JSON object."""
    return _json(os.path.join(folder, "config.json"))


def read_tokenizer_files(folder: str) -> tuple:
    """((file name, bytes), ...) of the `TOKENIZER_FILES` a checkpoint folder holds, each read once."""
    files = []
    for name in TOKENIZER_FILES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                files.append((name, f.read()))
    return tuple(files)


@contextlib.contextmanager
def folder_of(files, config, source=None):
    """A temporary checkpoint folder holding `files` ((name, bytes), ...) and `config` as its
    config.json, for the readers that take a folder; an error raised inside names `source` (where
    the files came from) instead of the copy."""
    with tempfile.TemporaryDirectory() as folder:
        for name, data in files:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        try:
            yield folder
        except (ValueError, FileNotFoundError) as error:
            where = source or f"the {config.get('model_type')} tokenizer files recorded with the model"
            raise type(error)(str(error).replace(folder, where)) from None


def built_checkpoint_tokenizer(files, model_type, pad_id=None, source=None):
    """The `CheckpointTokenizer` that a checkpoint's tokenizer `files` ((name, bytes), ...) make
    under `model_type` (its reader and layout), padding with `pad_id`; errors name `source`."""
    with folder_of(files, {"model_type": model_type, "pad_token_id": pad_id}, source) as folder:
        return checkpoint_tokenizer(folder)


# model_type -> reader(folder, config dict, tokenizer_config dict) -> CheckpointTokenizer
CHECKPOINT_TOKENIZERS = {}
TOKENIZER_FILES_OF = {}  # model_type -> the tokenizer files its reader needs


PREFERS_TOKENIZER_JSON = set()  # model_types whose folders' tokenizer.json wins over their other files


def register_checkpoint_tokenizer(model_type, reader, files, prefers_tokenizer_json=False):
    """Make `checkpoint_tokenizer` read a `model_type`'s folder with `reader(folder, config,
    tokenizer_config)`, from its tokenizer `files` (all of which it needs); with
    `prefers_tokenizer_json`, from the folder's tokenizer.json wherever it has one (GTE's and
    NomicBERT's folders ship it beside vocab.txt, and transformers reads it)."""
    CHECKPOINT_TOKENIZERS[model_type] = reader
    TOKENIZER_FILES_OF[model_type] = tuple(files)
    if prefers_tokenizer_json:
        PREFERS_TOKENIZER_JSON.add(model_type)
    return reader


def reads_tokenizer_json(folder, model_type=None):
    """Whether a checkpoint folder's tokenizer comes from its tokenizer.json: it has one, and its
    model_type (default: its config.json's) prefers it, has no reader of its own, or lacks the files
    that reader needs."""
    if not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return False
    if model_type is None:
        model_type = _json(os.path.join(folder, "config.json")).get("model_type", "bert")
    own = TOKENIZER_FILES_OF.get(model_type, ())
    return (
        model_type in PREFERS_TOKENIZER_JSON
        or model_type not in CHECKPOINT_TOKENIZERS
        or not all(os.path.isfile(os.path.join(folder, name)) for name in own)
    )


def check_tokenizer_files(folder, model_type, source="config.json"):
    """Refuse a folder whose tokenizer files are another model_type's than its config says (a BERT
    folder whose config.json says "roberta" would load as RoBERTa: positions and layout wrong)."""
    # tokenizer.json is every kind's: a folder may hold it besides, or instead of, its own files.
    needed = [n for n in TOKENIZER_FILES_OF.get(model_type, ()) if n != "tokenizer.json"]
    present = [
        n
        for n in TOKENIZER_FILES
        if n not in ("tokenizer_config.json", "tokenizer.json") and os.path.isfile(os.path.join(folder, n))
    ]
    if not needed or not present or set(needed) <= set(present):
        return
    owners = sorted(t for t, files in TOKENIZER_FILES_OF.items() if files and set(files) <= set(present))
    raise ValueError(
        f"{source} says model_type {model_type!r}, whose tokenizer is {' + '.join(needed)}, but {folder} holds "
        f"{' + '.join(present)}"
        + (f" (a {' / '.join(owners)} checkpoint's)" if owners else "")
        + ": the config does not belong to this checkpoint."
    )


# tokenizer_config.json's switches: transformers passes them to the tokenizer as they are, where a
# string ("false") is true; written by hand they are refused unless true or false.
TOKENIZER_SWITCHES = ("do_lower_case", "add_prefix_space", "keep_accents", "remove_space", "do_basic_tokenize")


def tokenizer_settings(folder: str) -> dict:
    """The folder's tokenizer_config.json ({} when absent), its switches checked (`_json`)."""
    return _json(os.path.join(folder, "tokenizer_config.json"))


def _json(path):
    """The JSON object in `path` ({} when there is none); anything else is refused by name
    (`read_json_object`), and a tokenizer_config.json switch that is not true or false too."""
    if not os.path.isfile(path):
        return {}
    value = read_json_object(path)
    if os.path.basename(path) == "tokenizer_config.json":
        # null is unset (transformers 5 writes `"add_prefix_space": null`): the tokenizer's own default.
        value = {key: v for key, v in value.items() if not (key in TOKENIZER_SWITCHES and v is None)}
        for key in TOKENIZER_SWITCHES:
            if key in value and not isinstance(value[key], bool):
                raise ValueError(
                    f"{path}: {key} is {json.dumps(value[key])}, not true or false (transformers would read it as "
                    f"{bool(value[key])}): write a JSON true or false."
                )
    return value


def required_file(folder, name, model_type):
    """The path of tokenizer file `name` in `folder`, or a FileNotFoundError naming what is missing."""
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{folder} has no {name}: a {model_type} checkpoint's tokenizer needs it (copy it from the checkpoint's repository)."
        )
    return path


def checkpoint_tokenizer(folder: str) -> CheckpointTokenizer:
    """The `CheckpointTokenizer` of a Hugging Face checkpoint folder (config.json and the
    tokenizer files of its model_type), checked against the config's vocab_size.

    Raises:
      FileNotFoundError: no config.json, or the tokenizer files the model_type needs.
      ValueError: an unsupported model_type, tokenizer files that do not parse, or a tokenizer
        whose vocabulary size is not the config's (it belongs to another checkpoint).
    """
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{folder} has no config.json.")
    config = _json(config_path)
    model_type = config.get("model_type", "bert")
    reader = CHECKPOINT_TOKENIZERS.get(model_type)
    if reads_tokenizer_json(folder, model_type):
        reader = tokenizer_json_checkpoint_tokenizer  # the tokenizers library's file, whatever the family
    if reader is None:
        raise ValueError(
            f"{config_path}: no tokenizer for model_type {model_type!r}; supported: {', '.join(sorted(CHECKPOINT_TOKENIZERS))}."
        )
    tokenizer = reader(folder, config, tokenizer_settings(folder))
    expected = config.get("vocab_size")
    if expected is not None and not fits_rows(tokenizer.vocabulary_size, expected):
        raise ValueError(
            f"{folder}: the {tokenizer.kind} tokenizer has {tokenizer.vocabulary_size} tokens but config.json says vocab_size "
            f"{expected}: the tokenizer files belong to another checkpoint."
        )
    return tokenizer


def _check_same_as_tokenizer_json(folder, tokens, lowercase):
    """Refuse a folder whose tokenizer.json is another tokenizer than its vocab.txt (with
    tokenizer_config.json's casing): transformers' fast tokenizer reads the one, its Python
    tokenizer and this library the other, so the model would be served other ids than it was
    trained on, whichever it was."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        return
    spec = read_json_object(path, "a tokenizer")
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    vocabulary = model.get("vocab") if model.get("type", "WordPiece") == "WordPiece" else None
    if not isinstance(vocabulary, dict):
        difference = f"its model is {model.get('type')!r}, not vocab.txt's WordPiece"
    elif len(vocabulary) != len(tokens):
        difference = f"{len(vocabulary)} tokens in tokenizer.json, {len(tokens)} in vocab.txt"
    else:
        moved = next((i for i, token in enumerate(tokens) if vocabulary.get(token) != i), None)
        normalizer = spec.get("normalizer") if isinstance(spec.get("normalizer"), dict) else {}
        json_lowercase = normalizer.get("lowercase", True) if normalizer.get("type") == "BertNormalizer" else None
        if moved is not None:
            other = next((t for t, i in vocabulary.items() if i == moved), None)
            difference = f"id {moved} is {tokens[moved]!r} in vocab.txt, {other!r} in tokenizer.json"
        elif json_lowercase is not None and bool(json_lowercase) != bool(lowercase):
            difference = (
                f"vocab.txt is read {'lower-cased' if lowercase else 'cased'} (tokenizer_config.json's do_lower_case), "
                f"tokenizer.json's BertNormalizer {'lower-cases' if json_lowercase else 'keeps the case'}"
            )
        else:
            return
    raise ValueError(
        f"{folder}: vocab.txt and tokenizer.json are different tokenizers ({difference}): transformers' fast "
        "tokenizer reads tokenizer.json, its Python tokenizer and this library vocab.txt. Keep the files of the "
        "tokenizer the model was trained with."
    )


def special_id(lookup, token, source):
    """`lookup(token)`, or a ValueError: the tokenizer file `source` lacks a special token."""
    try:
        return lookup(token)
    except (KeyError, ValueError):
        raise ValueError(f"{source} lacks the special token {token!r} its family's layout needs.") from None


def wordpiece_checkpoint_tokenizer(folder, config, tokenizer_config, segments=True):
    """WordPiece from vocab.txt, `[CLS] A [SEP] B [SEP]`; `segments=False` for models without segment embeddings."""
    path = required_file(folder, "vocab.txt", config.get("model_type", "bert"))
    tokens = load_vocabulary(path)
    lowercase = tokenizer_config.get("do_lower_case", True)
    _check_same_as_tokenizer_json(folder, tokens, lowercase)
    tokenizer = InGraphTokenizer(tokens, lowercase=lowercase)
    layout = bert_layout(tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, segments=segments)
    return CheckpointTokenizer(tokenizer, layout, len(tokens), "wordpiece", unknown_id=tokens.index("[UNK]"))


def spiece_tokenizer(folder, model_type, lowercase, strip_accents=True):
    """A `spiece.model` with the clean-up ALBERT's and XLNet's tokenizers apply first, and a
    lookup of its special tokens' ids."""
    path = required_file(folder, "spiece.model", model_type)
    tokenizer = SentencePiece(
        read_sentencepiece_model(path), lowercase=lowercase, strip_accents=strip_accents, replace_quotes=True
    )
    special = lambda token: special_id(tokenizer.pieces.index, token, path)  # noqa: E731
    return tokenizer, special


def tokenizer_json_checkpoint_tokenizer(folder, config, tokenizer_config, default_side="right"):
    """The tokenizer and layout a folder's tokenizer.json describes (`read_tokenizer_json`), padded
    as transformers pads it: with the config's `pad_token_id`, else tokenizer_config.json's
    `pad_token` (Qwen3's config.json names none: <|endoftext|>), else the file's own; on the side
    tokenizer_config.json's `padding_side` names (left in Qwen3-Embedding's folders, where the last
    token is read), else `default_side` (the tokenizer class's: left for Gemma's)."""
    path = required_file(folder, "tokenizer.json", config.get("model_type", "bert"))
    settings = os.path.join(folder, "tokenizer_config.json")
    pad_id = config.get("pad_token_id")
    pad_token = tokenizer_config.get("pad_token")
    if isinstance(pad_token, dict):  # an AddedToken as transformers serializes it
        pad_token = pad_token.get("content")
    if pad_id is None and pad_token is not None:
        spec = read_json_object(path, "a tokenizer")
        ids = {token.get("content"): token.get("id") for token in spec.get("added_tokens") or []}
        ids = {**(spec.get("model") or {}).get("vocab", {}), **ids}
        if pad_token not in ids:
            raise ValueError(f"{settings}: pad_token {pad_token!r} is not a token of {path}.")
        pad_id = ids[pad_token]
    side = tokenizer_config.get("padding_side", default_side)
    if side not in ("left", "right"):
        raise ValueError(f"{settings}: padding_side is {side!r}; transformers takes left or right.")
    tokenizer = read_tokenizer_json(path, pad_id=pad_id)
    return dataclasses.replace(tokenizer, layout=dataclasses.replace(tokenizer.layout, pad_left=side == "left"))


register_checkpoint_tokenizer("bert", wordpiece_checkpoint_tokenizer, ["vocab.txt"])
