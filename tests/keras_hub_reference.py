"""keras-hub's own WordPiece tokenizer and segment packer, as a reference (code we did not write)
that the library's in-graph WordPiece (`ModelTokenizer.packer`, a served text model) is checked
against."""

import keras_hub
import numpy as np
import tensorflow as tf

from bertlayers.tokenizers import load_vocabulary


def wordpiece_tokenizer(vocabulary, lowercase=True):
    """keras-hub's `WordPieceTokenizer` over a vocab.txt path or a list of tokens."""
    if isinstance(vocabulary, str):
        vocabulary = load_vocabulary(vocabulary)
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary, lowercase=lowercase, strip_accents=lowercase, oov_token="[UNK]"
    )


def keras_hub_packer(vocabulary, sequence_length, lowercase=True):
    """`(first, second=None)` → {token_ids, segment_ids, padding_mask} int32 `[batch, sequence_length]`
    through keras-hub's `WordPieceTokenizer` and `MultiSegmentPacker` (`[CLS] A [SEP] B [SEP]`, B cut
    first)."""
    tokenizer = wordpiece_tokenizer(vocabulary, lowercase)
    cls, sep, pad = (tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]"))
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=sequence_length, start_value=cls, end_value=sep, pad_value=pad, truncate="waterfall"
    )

    def pack(first, second=None):
        as_batch = lambda texts: tf.constant([texts] if isinstance(texts, str) else list(texts))  # noqa: E731
        segments = (tokenizer(as_batch(first)),) + (() if second is None else (tokenizer(as_batch(second)),))
        token_ids, segment_ids = packer(segments)
        token_ids = np.asarray(token_ids, "int32")
        return {
            "token_ids": token_ids,
            "segment_ids": np.asarray(segment_ids, "int32"),
            "padding_mask": (token_ids != pad).astype("int32"),
        }

    return pack
