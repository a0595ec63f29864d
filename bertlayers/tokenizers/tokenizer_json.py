"""The `tokenizers` library's `tokenizer.json`, read into the graph tokenizers (the ids of
`Tokenizer.from_file(path).encode(text, pair).ids`, in training and in a served graph alike).

    added tokens ─ split out first, each its own id ([CLS], <mask>, ...)
    normalizer ─ pre-tokenizer ─ model              what the graph runs
    BertNormalizer  BertPreTokenizer  WordPiece     `InGraphTokenizer` (NomicBERT, GTE, BERT)
    NFC/NFKC/none   ByteLevel         BPE           `ByteLevelBPE`, GPT-2's regex (ModernBERT)
    none            Split(Llama-3) +  BPE with      `ByteLevelBPE`, Llama-3's regex (EuroBERT)
                    ByteLevel         ignore_merges
    NFC/none        Split(Qwen2) +    BPE           `ByteLevelBPE`, Qwen2's regex (Qwen3)
                    ByteLevel
    " " → "▁"       none / Split(" ") BPE with      `SentencePieceBPE` (Gemma)
                                      byte_fallback
    post-processor: TemplateProcessing, BertProcessing, RobertaProcessing (or none) → `InputLayout`

Whatever else a file asks for (another regex, a Unigram model, Lowercase, BPE dropout, byte
fallback with another normalizer, single-word added tokens, ...) is refused by name when the file is read: the graph would
tokenize it differently, and silently.
"""

import json
import unicodedata

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.byte_level_bpe import WHITESPACE, ByteLevelBPE
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import InputLayout
from bertlayers.tokenizers.sentencepiece_bpe import WORD_START, SentencePieceBPE
from bertlayers.tokenizers.wordpiece import InGraphTokenizer
from bertlayers.utils.text_files import read_text

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

from bertlayers.utils.saved_module import SavedModule  # noqa: E402  (after the check, as above)

# The Split regex of Llama-3's tokenizer.json, as the file spells it (`ByteLevelBPE`'s "llama3"
# pre-tokenizer runs it in RE2).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
# Qwen2's and Qwen3's: Llama-3's with one digit a word (`ByteLevelBPE`'s "qwen2").
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}", 1)
SPLIT_PATTERNS = {LLAMA3_PATTERN: "llama3", QWEN2_PATTERN: "qwen2"}
UNICODE_FORMS = ("NFC", "NFKC", "NFD", "NFKD")


def read_tokenizer_json(path: str, pad_id: int | None = None) -> CheckpointTokenizer:
    """The graph tokenizer and input layout a `tokenizer.json` describes, as a `CheckpointTokenizer`.

    Args:
      path: the file.
      pad_id: the id padding positions get (a config.json's `pad_token_id`); None: the file's
        `padding.pad_id`, else its "[PAD]" / "<pad>" token.

    Raises:
      ValueError: the file is not a tokenizer.json, or asks for something the graph tokenizers do
        not do (named, with the JSON field it is in).
    """
    try:
        spec = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise ValueError(f"{path} is not a tokenizers library tokenizer.json (no 'model' object).")
    refuse = _refuser(path)
    model = spec["model"]
    kind = model.get("type") or ("BPE" if "merges" in model else "WordPiece" if "vocab" in model else None)
    if kind == "WordPiece":
        tokenizer, token_to_id = _wordpiece(spec, model, refuse)
        unknown = token_to_id[model.get("unk_token", "[UNK]")]
        kind_name = "wordpiece"
    elif kind == "BPE" and model.get("byte_fallback"):
        tokenizer, token_to_id = _sentencepiece_bpe(spec, model, refuse)
        unknown = tokenizer.unknown_id
        kind_name = "sentencepiece_bpe"
    elif kind == "BPE":
        tokenizer, token_to_id = _byte_level_bpe(spec, model, refuse)
        unknown = tokenizer.unknown_id
        kind_name = "byte_level_bpe"
    else:
        refuse("model.type", kind, "WordPiece or BPE (a Unigram tokenizer.json is not read yet)")
    token_to_id = dict(token_to_id)
    added = _added_tokens(spec, token_to_id, refuse)
    token_to_id.update(added)
    layout = _layout(spec.get("post_processor"), token_to_id, _pad_id(spec, token_to_id, pad_id, refuse), refuse)
    if added:
        tokenizer = WithAddedTokens(tokenizer, spec["added_tokens"])
    size = max(token_to_id.values()) + 1
    return CheckpointTokenizer(tokenizer, layout, size, kind_name, unknown_id=unknown)


def _refuser(path):
    def refuse(field, value, supported):
        raise ValueError(
            f"{path}: {field} is {value!r}, which the graph tokenizers cannot do as the tokenizers library does "
            f"(supported: {supported}); refused rather than tokenized differently."
        )

    return refuse


def _components(spec):
    """A normalizer or pre-tokenizer spec as a list of its steps (a Sequence flattened; none: [])."""
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        steps = spec.get("normalizers", spec.get("pretokenizers", spec.get("processors", [])))
        return [step for inner in steps for step in _components(inner)]
    return [spec]


def _wordpiece(spec, model, refuse):
    """BERT's pipeline: BertNormalizer, BertPreTokenizer, WordPiece with "##" and [UNK]."""
    for field, wanted in (
        ("continuing_subword_prefix", "##"),
        ("unk_token", "[UNK]"),
        ("max_input_chars_per_word", 100),
    ):
        if model.get(field, wanted) != wanted:
            refuse(f"model.{field}", model[field], repr(wanted))
    normalizers = _components(spec.get("normalizer"))
    lowercase = False
    for step in normalizers:
        if step.get("type") != "BertNormalizer":
            refuse("normalizer.type", step.get("type"), "BertNormalizer")
        lowercase = bool(step.get("lowercase", True))
        strip = step.get("strip_accents")
        if strip is not None and strip != lowercase:
            refuse("normalizer.strip_accents", strip, f"null or the same as lowercase ({lowercase})")
        if not step.get("clean_text", True) or not step.get("handle_chinese_chars", True):
            refuse("normalizer.clean_text / handle_chinese_chars", False, "true")
    if not normalizers:
        refuse("normalizer", None, "BertNormalizer with a WordPiece model")
    pre = [step.get("type") for step in _components(spec.get("pre_tokenizer"))]
    if pre != ["BertPreTokenizer"]:
        refuse("pre_tokenizer", pre, "BertPreTokenizer with a WordPiece model")
    token_to_id = _checked_vocabulary(model["vocab"], refuse)
    tokens = [None] * len(token_to_id)
    for token, index in token_to_id.items():
        tokens[index] = token
    for token in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"):
        if token not in token_to_id:
            refuse("model.vocab", f"without {token}", "a BERT vocabulary with [CLS], [SEP], [PAD] and [UNK]")
    return InGraphTokenizer(tokens, lowercase=lowercase, normalization="tokenizers"), token_to_id


def _byte_level_bpe(spec, model, refuse):
    """Byte-level BPE: a Unicode normalizer (or none); ByteLevel with GPT-2's regex, or Llama-3's
    Split then ByteLevel without one."""
    _plain_bpe(model, refuse)
    form = None
    for step in _components(spec.get("normalizer")):
        if step.get("type") not in UNICODE_FORMS or form is not None:
            refuse("normalizer.type", step.get("type"), "none, or one of " + ", ".join(UNICODE_FORMS))
        form = step["type"]
    steps = _components(spec.get("pre_tokenizer"))
    pre_tokenizer = None
    if [s.get("type") for s in steps] == ["ByteLevel"] and steps[0].get("use_regex", True):
        pre_tokenizer = "gpt2"
        byte_level = steps[0]
    elif [s.get("type") for s in steps] == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        split, byte_level = steps
        pattern = split.get("pattern", {}).get("Regex")
        if pattern not in SPLIT_PATTERNS:
            refuse("pre_tokenizer Split pattern", pattern, "Llama-3's or Qwen2's regex")
        if split.get("behavior") != "Isolated" or split.get("invert"):
            refuse("pre_tokenizer Split behavior", split.get("behavior"), "Isolated, not inverted")
        pre_tokenizer = SPLIT_PATTERNS[pattern]
    else:
        refuse(
            "pre_tokenizer",
            [s.get("type") for s in steps],
            "ByteLevel (GPT-2's regex) or Split (Llama-3's or Qwen2's) + ByteLevel",
        )
    if byte_level.get("add_prefix_space"):
        refuse("pre_tokenizer ByteLevel.add_prefix_space", True, "false")
    vocabulary = _checked_vocabulary(model["vocab"], refuse)
    tokenizer = ByteLevelBPE(
        vocabulary,
        _merges(model, refuse),
        unknown_token=model.get("unk_token") or "<unk>",
        pre_tokenizer=pre_tokenizer,
        ignore_merges=bool(model.get("ignore_merges", False)),
        normalization_form=form,
    )
    return tokenizer, vocabulary


def _plain_bpe(model, refuse):
    """Refuse what neither BPE kind does: dropout, subword prefixes and suffixes."""
    for field in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(field) not in (None, ""):
            refuse(f"model.{field}", model[field], "null")


def _merges(model, refuse):
    """The BPE model's merges as (left, right) pairs in rank order (the file writes each as "a b"
    or ["a", "b"])."""
    merges = []
    for number, merge in enumerate(model.get("merges", [])):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if len(pair) != 2 or not all(isinstance(side, str) for side in pair):
            refuse(f"model.merges[{number}]", merge, "two symbols")
        merges.append(tuple(pair))
    return merges


def _sentencepiece_bpe(spec, model, refuse):
    """Gemma's pipeline: spaces replaced by "▁", the whole text one word (its Split at " " finds
    none left), BPE over characters with byte fallback."""
    _plain_bpe(model, refuse)
    if model.get("ignore_merges"):
        refuse("model.ignore_merges", True, "false with byte_fallback")
    normalizers = _components(spec.get("normalizer"))
    if [(s.get("type"), s.get("pattern"), s.get("content")) for s in normalizers] != [
        ("Replace", {"String": " "}, WORD_START)
    ]:
        refuse("normalizer", normalizers, f"one Replace of ' ' by {WORD_START!r} with byte_fallback (Gemma's)")
    steps = _components(spec.get("pre_tokenizer"))
    # A Split at spaces is a no-op once the normalizer has replaced them all.
    if steps and [(s.get("type"), s.get("pattern"), s.get("invert", False)) for s in steps] != [
        ("Split", {"String": " "}, False)
    ]:
        refuse("pre_tokenizer", steps, "none, or a Split at ' ' (Gemma's) with byte_fallback")
    vocabulary = _checked_vocabulary(model["vocab"], refuse)
    try:
        tokenizer = SentencePieceBPE(vocabulary, _merges(model, refuse), model.get("unk_token") or "<unk>")
    except ValueError as error:  # a byte token missing
        refuse("model.vocab", str(error), "every byte token <0x00> .. <0xFF> with byte_fallback")
    return tokenizer, vocabulary


def _checked_vocabulary(vocabulary, refuse):
    if not isinstance(vocabulary, dict) or not all(type(i) is int for i in vocabulary.values()):
        refuse("model.vocab", type(vocabulary).__name__, "a token -> id mapping")
    ids = sorted(vocabulary.values())
    if ids != list(range(len(ids))):
        refuse(
            "model.vocab ids",
            f"{len(ids)} tokens with ids up to {ids[-1] if ids else None}",
            "0 .. size - 1, each once",
        )
    return dict(vocabulary)


def _added_tokens(spec, token_to_id, refuse):
    """{content: id} of the added tokens (special or not), each checked: one the graph can split out."""
    added = {}
    for number, token in enumerate(spec.get("added_tokens") or []):
        content, index = token.get("content"), token.get("id")
        where = f"added_tokens[{number}] ({content!r})"
        if not isinstance(content, str) or not content or type(index) is not int:
            refuse(where, token, "a content string and an integer id")
        if token.get("single_word"):
            refuse(f"{where}.single_word", True, "false")
        if token.get("normalized") and not token.get("special") and _changes_under(spec, content):
            refuse(f"{where}.normalized", True, "false, or a token the normalizer leaves as it is")
        if content in token_to_id and token_to_id[content] != index:
            refuse(where, f"id {index}, but the vocabulary gives it {token_to_id[content]}", "one id per token")
        added[content] = index
    return added


def _changes_under(spec, content):
    """Whether the file's normalizer would change `content` (a normalized added token then
    matches text the raw-text split would miss)."""
    for step in _components(spec.get("normalizer")):
        if step.get("type") in UNICODE_FORMS and unicodedata.normalize(step["type"], content) != content:
            return True
        if step.get("type") == "BertNormalizer" and step.get("lowercase", True) and content.lower() != content:
            return True
    return False


def _pad_id(spec, token_to_id, pad_id, refuse):
    if pad_id is not None:
        return int(pad_id)
    padding = spec.get("padding") or {}
    if "pad_id" in padding:
        return int(padding["pad_id"])
    for token in ("[PAD]", "<pad>", "<|pad|>", "<|end_of_text|>"):
        if token in token_to_id:
            return token_to_id[token]
    refuse("padding", None, "a pad_token_id in config.json, the file's padding.pad_id, or a [PAD] / <pad> token")


def _layout(processor, token_to_id, pad_id, refuse):
    """The `InputLayout` of a post-processor: its special tokens around one text and a pair."""
    steps = [s for s in _components(processor) if s.get("type") != "ByteLevel"]  # ByteLevel: offsets only
    if not steps:
        return InputLayout((), (), (), pad_id, second_segment=0)
    if len(steps) > 1:
        refuse(
            "post_processor",
            [s.get("type") for s in steps],
            "one of TemplateProcessing, BertProcessing, RobertaProcessing",
        )
    step = steps[0]
    if step["type"] == "BertProcessing":
        cls, sep = step["cls"][1], step["sep"][1]
        return InputLayout((cls,), (sep,), (sep,), pad_id, second_segment=1)
    if step["type"] == "RobertaProcessing":
        cls, sep = step["cls"][1], step["sep"][1]
        return InputLayout((cls,), (sep, sep), (sep,), pad_id, second_segment=0)
    if step["type"] != "TemplateProcessing":
        refuse("post_processor.type", step["type"], "TemplateProcessing, BertProcessing, RobertaProcessing")
    special = {name: entry["ids"] for name, entry in (step.get("special_tokens") or {}).items()}

    def parsed(template, field):
        """[(kind, content, type_id)]: kind "sequence" ($A / $B) or "special"."""
        items = []
        for item in template or []:
            if "Sequence" in item:
                items.append(("sequence", item["Sequence"]["id"], item["Sequence"]["type_id"]))
            elif "SpecialToken" in item:
                name = item["SpecialToken"]["id"]
                ids = special.get(name) or ([token_to_id[name]] if name in token_to_id else None)
                if ids is None:
                    refuse(f"post_processor.{field}", name, "special tokens the file defines")
                items.extend(("special", i, item["SpecialToken"]["type_id"]) for i in ids)
        return items

    single, pair = parsed(step.get("single"), "single"), parsed(step.get("pair"), "pair")
    a_at = [i for i, item in enumerate(single) if item[0] == "sequence"]
    pair_seqs = [i for i, item in enumerate(pair) if item[0] == "sequence"]
    if len(a_at) != 1 or len(pair_seqs) != 2:
        refuse(
            "post_processor",
            "a template without one $A (and $A, $B in pair)",
            "[start] $A [end] and [start] $A [between] $B [end]",
        )
    start, end = [i for _, i, _ in single[: a_at[0]]], [i for _, i, _ in single[a_at[0] + 1 :]]
    a, b = pair_seqs
    pair_start = [i for _, i, _ in pair[:a]]
    between = [i for _, i, _ in pair[a + 1 : b]]
    pair_end = [i for _, i, _ in pair[b + 1 :]]
    if pair_start != start or pair_end != end:
        refuse("post_processor", "a pair template whose start or end differs from the single one's", "the same ends")
    segment_of_b = pair[b][2]
    if any(type_id != 0 for _, _, type_id in pair[:b]):
        refuse("post_processor.pair type_ids", [t for _, _, t in pair], "0 up to $B")
    end_segments = tuple(type_id for _, _, type_id in pair[b + 1 :])
    return InputLayout(
        tuple(start),
        tuple(between),
        tuple(end),
        pad_id,
        second_segment=segment_of_b,
        end_segments=None if all(s == segment_of_b for s in end_segments) else end_segments,
    )


class WithAddedTokens(SavedModule):
    """A graph tokenizer whose text has its added tokens split out first, each given its own id, as
    the tokenizers library does (longest first where two start at one place; `lstrip` / `rstrip`
    ones take the whitespace beside them).

    Args:
      tokenizer: the graph tokenizer of the rest (`tokenize`, and `tokenize_with_offsets` where
        it has it).
      added_tokens: the tokenizer.json's `added_tokens` entries.
    """

    def __init__(self, tokenizer, added_tokens):
        super().__init__()
        self.tokenizer = tokenizer
        alternatives = []
        for token in sorted(added_tokens, key=lambda t: -len(t["content"])):
            literal = "".join(f"\\x{{{ord(c):x}}}" for c in token["content"])  # RE2-safe
            alternatives.append(
                (f"[{WHITESPACE}]*" if token.get("lstrip") else "")
                + literal
                + (f"[{WHITESPACE}]*" if token.get("rstrip") else "")
            )
        self.pattern = "|".join(f"(?:{a})" for a in alternatives)
        self._ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([t["content"] for t in added_tokens]),
                tf.constant([t["id"] for t in added_tokens], tf.int32),
            ),
            default_value=-1,
        )

    def _segments(self, texts):
        texts = tf.convert_to_tensor(texts, tf.string)
        segments, starts, ends = tf_text.regex_split_with_offsets(texts, self.pattern, self.pattern)
        flat = segments.flat_values
        matched = tf.strings.regex_full_match(flat, self.pattern)
        # A token with whitespace of its own (PyLate's "[Q] ") is its segment as it stands; an
        # lstrip / rstrip one's segment carries the whitespace it took beside it.
        exact = self._ids.lookup(tf.where(matched, flat, ""))
        content = tf.strings.regex_replace(flat, f"^[{WHITESPACE}]+|[{WHITESPACE}]+$", "")
        ids = tf.where(exact >= 0, exact, self._ids.lookup(tf.where(matched, content, "")))
        return segments, starts, ends, ids  # ids: the added token's, or -1 for text

    def tokenize(self, texts):
        """Ids of a batch of strings `[batch]`, ragged int32 `[batch, (pieces)]`."""
        segments, _, _, ids = self._segments(texts)
        added = ids >= 0
        rest = self.tokenizer.tokenize(tf.where(added, "", segments.flat_values))  # [segments, (pieces)]
        alone = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(ids, added), tf.cast(added, tf.int64))
        pieces = tf.concat([tf.cast(alone, rest.dtype), rest], axis=1)  # [segments, (pieces)]
        return tf.RaggedTensor.from_row_splits(pieces.flat_values, tf.gather(pieces.row_splits, segments.row_splits))

    def tokenize_with_offsets(self, texts):
        """As the wrapped tokenizer's (ids, start and end byte offsets, word starts and ends), with
        an added token one piece spanning its text."""
        segments, starts, ends, ids = self._segments(texts)
        added = ids >= 0
        rest = self.tokenizer.tokenize_with_offsets(tf.where(added, "", segments.flat_values))
        lengths = tf.cast(added, tf.int64)
        alone = (
            tf.boolean_mask(ids, added),
            tf.boolean_mask(starts.flat_values, added),
            tf.boolean_mask(ends.flat_values, added),
            tf.ones_like(tf.boolean_mask(ids, added), tf.bool),
            tf.ones_like(tf.boolean_mask(ids, added), tf.bool),
        )
        shift = starts.flat_values  # each segment's start in its text
        outputs = []
        for index, (first, second) in enumerate(zip(alone, rest)):
            if index in (1, 2):  # offsets within a segment, moved to the segment's place in its text
                moved = tf.repeat(tf.cast(shift, second.dtype), second.row_lengths())
                second = second.with_flat_values(second.flat_values + moved)
            first = tf.RaggedTensor.from_row_lengths(tf.cast(first, second.dtype), lengths)
            joined = tf.concat([first, second], axis=1)
            outputs.append(
                tf.RaggedTensor.from_row_splits(joined.flat_values, tf.gather(joined.row_splits, segments.row_splits))
            )
        return tuple(outputs)
