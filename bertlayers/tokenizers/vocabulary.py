"""WordPiece vocabularies: facts about the ids that masking needs, and training a new one."""

import dataclasses

import numpy as np

from bertlayers.tokenizers.tokenizer import SPECIAL_TOKENS, load_vocabulary
from bertlayers.utils.atomic_files import write_text


@dataclasses.dataclass(frozen=True)
class VocabularyInfo:
    """What masking and packing need to know about a vocabulary.

    Attributes:
      tokens: every token, by id.
      pad_id, unk_id, cls_id, sep_id, mask_id: the special tokens' ids.
      is_continuation: bool `[V]`, True for "##" pieces (a word continues).
      replacement_ids: int `[R]`, the ids a masked token may be replaced by at random (real
        tokens: no "[...]" entries such as [PAD], [CLS] or [unused12]).
    """

    tokens: tuple
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    is_continuation: np.ndarray
    replacement_ids: np.ndarray

    @classmethod
    def from_tokens(cls, tokens):
        tokens = tuple(tokens)
        index = {token: i for i, token in enumerate(tokens)}
        missing = [t for t in SPECIAL_TOKENS if t not in index]
        if missing:
            raise ValueError(f"The vocabulary lacks the special tokens {missing}.")
        return cls(
            tokens=tokens,
            pad_id=index["[PAD]"],
            unk_id=index["[UNK]"],
            cls_id=index["[CLS]"],
            sep_id=index["[SEP]"],
            mask_id=index["[MASK]"],
            is_continuation=np.array([t.startswith("##") for t in tokens]),
            replacement_ids=np.array(
                [i for i, t in enumerate(tokens) if not (t.startswith("[") and t.endswith("]"))], "int32"
            ),
        )

    @classmethod
    def from_file(cls, path):
        return cls.from_tokens(load_vocabulary(path))

    @property
    def size(self):
        return len(self.tokens)

    def model_tokenizer(self, lowercase):
        """What a model trained on these ids records (`ModelTokenizer`): this vocabulary in BERT's layout."""
        from bertlayers.tokenizers.model_tokenizer import ModelTokenizer

        return ModelTokenizer.wordpiece(self.tokens, lowercase)

    @property
    def never_masked_ids(self):
        return (self.pad_id, self.cls_id, self.sep_id)


def build_wordpiece_vocabulary(documents, vocabulary_size, output_path, lowercase=True):
    """Train a WordPiece vocabulary on `documents` (lists of sentences) and write vocab.txt.

    Uses tensorflow-text's trainer through keras-hub; BERT's special tokens come first
    ([PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4).
    """
    import keras_hub
    import tensorflow as tf

    sentences = tf.data.Dataset.from_tensor_slices([s for document in documents for s in document])
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        sentences.batch(1000),
        vocabulary_size=vocabulary_size,
        lowercase=lowercase,
        strip_accents=lowercase,
        reserved_tokens=list(SPECIAL_TOKENS),
    )
    # The trainer keeps whitespace as tokens (" ", "## "); BERT's tokenizer, splitting words at
    # whitespace first, never gives them: their ids would be wasted.
    vocabulary = [token for token in vocabulary if not any(c.isspace() for c in token)]
    write_text(output_path, "\n".join(vocabulary) + "\n")
    return vocabulary
