"""Reading UTF-8 text files line by line, with errors that name the file and the line."""


def numbered_lines(path):
    """(line number, line) pairs of a UTF-8 file; a line that does not decode is a ValueError
    naming `path`, the line and the byte (instead of a UnicodeDecodeError naming neither)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
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
