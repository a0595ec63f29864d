"""Reading UTF-8 text files line by line, with errors that name the file and the line."""


def numbered_lines(path):
    """(line number, line) pairs of a UTF-8 file; a line that does not decode is a ValueError
    naming `path`, the line and the byte (instead of a UnicodeDecodeError naming neither), and so
    is a byte-order mark (it would become part of the first token, header or text)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raise ValueError(
                    f"{path}:1: starts with a UTF-8 byte-order mark (BOM); save the file as UTF-8 without one."
                )
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"{path}:{number}: not valid UTF-8 (byte {raw[error.start]:#04x} at column {error.start + 1}); "
                    f"save the file as UTF-8."
                ) from None


def read_text(path):
    """The whole of a UTF-8 file, decoding errors named as by `numbered_lines`."""
    return "".join(line for _, line in numbered_lines(path))


def text_batch(texts, what="text"):
    """`texts` (a string or a sequence of strings) as a list of UTF-8 `bytes`, each checked: a
    value that is not a string, or a string that is not Unicode text (a lone surrogate, as
    `bytes.decode(errors="surrogateescape")` leaves), is a ValueError naming which text and where."""
    texts = [texts] if isinstance(texts, (str, bytes)) else list(texts)
    encoded = []
    for index, text in enumerate(texts):
        if isinstance(text, bytes):
            encoded.append(text)
            continue
        if not isinstance(text, str):
            raise ValueError(f"{what} {index} is a {type(text).__name__} ({text!r}), not a string.")
        try:
            encoded.append(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise ValueError(
                f"{what} {index} holds {text[error.start]!r} at character {error.start}, a lone surrogate that is not "
                "Unicode text (bytes decoded with errors='surrogateescape'?); decode them with errors='replace'."
            ) from None
    return encoded


def json_value(text, where):
    """`json.loads(text)`, refusing an object that gives a key twice (json.loads would keep the last
    without a word), named by `where` (a file, or its line)."""
    import json

    def no_repeats(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"{where}: the key {key!r} is given twice in one object; keep one.")
            seen.add(key)
        return dict(pairs)

    return json.loads(text, object_pairs_hook=no_repeats)


def read_json_object(path, what="settings"):
    """The JSON object in a UTF-8 file (a config), refused by name where it is not valid JSON, is
    another kind of value (a list, a string, null), or gives a key twice."""
    import json

    try:
        value = json_value(read_text(path), path)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        raise ValueError(f"{path} holds a JSON {kind}, not the object of {what} it should be.")
    return value
