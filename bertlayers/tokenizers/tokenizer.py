"""WordPiece vocab.txt files, read and checked."""

from bertlayers.startup import require_tensorflow
from bertlayers.utils.text_files import numbered_lines

tf = require_tensorflow(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocabulary(path: str) -> list[str]:
    """The tokens of a `vocab.txt` (one per line, the line number minus one its id), checked as a
    whole: every token non-empty, without whitespace inside or at its end (keras-hub's trainer's
    " " and "## " aside), and unique (two lines of one token give one
    of their ids no text at all; tensorflow-text refuses them naming neither), BERT's special tokens
    present."""
    vocabulary, lines = [], {}
    for number, line in numbered_lines(path):
        token = line.rstrip("\r\n")
        # Whitespace at a token's end never matches (WordPiece splits on it) but is harmless: keras-hub's
        # vocabulary trainer writes " " and "## ". Inside a token it is another format's line ("tok\t-3.4").
        if not token or any(character.isspace() for character in token.strip()):
            raise ValueError(
                f"{path}:{number}: the token {token!r} is empty or holds whitespace inside; a WordPiece "
                "vocab.txt has one token per line."
            )
        if token != token.rstrip() and token.strip() not in ("", "##"):
            # The tokenizers library (transformers' fast tokenizer) reads "the " as "the"; its Python
            # BertTokenizer and keras-hub as a token no text matches: training and serving would differ.
            raise ValueError(
                f"{path}:{number}: the token {token!r} ends in whitespace, which tokenizers disagree on "
                f"(read as {token.rstrip()!r}, or as a token no text matches); remove the whitespace."
            )
        if token in lines:
            raise ValueError(
                f"{path}:{number}: the token {token!r} is on line {lines[token]} already; each token "
                "must be listed once (its line gives its id)."
            )
        lines[token] = number
        vocabulary.append(token)
    missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
    if missing:
        raise ValueError(f"{path} lacks the special tokens {missing}; is it a BERT vocab.txt?")
    return vocabulary


def check_vocabulary_fits(vocabulary, vocabulary_size, source="the vocabulary"):
    """Raise a ValueError unless `vocabulary` (a vocab.txt path or tokens) has exactly the
    model's `vocabulary_size` tokens: another size means it belongs to another model, whose
    ids would read the wrong embedding rows (a same-size foreign vocabulary cannot be told)."""
    tokens = load_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
    if len(tokens) != vocabulary_size:
        raise ValueError(
            f"{vocabulary if isinstance(vocabulary, str) else source} has {len(tokens)} tokens, but the model's "
            f"token embedding has {vocabulary_size} rows: the vocabulary belongs to another model. "
            f"Use the vocab.txt the model was trained with."
        )
    return tokens
