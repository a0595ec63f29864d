"""SentencePiece (ALBERT's and XLNet's `spiece.model`, XLM-R's `sentencepiece.bpe.model`) as
graph ops: tensorflow-text's SentencePiece kernels (linked by every TF Serving since 2.12), after
the text clean-up the checkpoints' tokenizers apply first, and the checkpoints' own id order.
Ids equal Hugging Face's fast tokenizers' (tests/test_subword_tokenizers.py).
"""

import hashlib

import numpy as np
from tensorflow_text.python.ops import sentencepiece_tokenizer as tf_text_sentencepiece

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.byte_level_bpe import WHITESPACE

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

from bertlayers.utils.saved_module import SavedModule  # noqa: E402  (after the check, as above)


class _NamedModelResource(tf_text_sentencepiece._SentencepieceModelResource):
    """tensorflow-text's SentencePiece model resource, under a name of its own.

    Unnamed, the resource belongs to the op's kernel (tensorflow-text's TODO b/318839908), and
    eager TensorFlow drops its cached kernels whenever a seed is set (`keras.utils.set_random_seed`):
    every tokenizer made before then failed with "Resource ... SentencepieceOp ... does not
    exist". Named after the model's bytes, it lives in the resource manager; one model, one
    resource."""

    def _create_resource(self):
        name = "bertlayers_sentencepiece_" + hashlib.sha256(self._model).hexdigest()[:24]
        return tf_text_sentencepiece.gen_sentencepiece_tokenizer.sentencepiece_op(model=self._model, shared_name=name)


# How text is normalized: "model", by the model file's own rules (its NFKC character map: ALBERT,
# XLNet, XLM-R as SentencePiece does); "nfc", as transformers' DeBERTa-v2 tokenizer does instead
# (whitespace runs collapsed, NFC, no character map).
NORMALIZATIONS = ("model", "nfc")


def without_normalizer_rules(model):
    """A SentencePiece model (bytes) whose normalizer is the identity: no character map, the dummy
    prefix and whitespace clean-up kept."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.precompiled_charsmap = b""
    return proto.SerializeToString()


def read_sentencepiece_model(path):
    """The bytes of a SentencePiece model file, checked to be one (a ValueError otherwise)."""
    with open(path, "rb") as f:
        proto = f.read()
    try:
        import sentencepiece

        pieces = sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size()
    except (RuntimeError, OSError, ValueError) as error:
        raise ValueError(f"{path} is not a SentencePiece model: {error}") from None
    if pieces == 0:
        raise ValueError(f"{path} is not a SentencePiece model: it has no pieces.")
    return proto


class SentencePiece(SavedModule):
    """Strings → a checkpoint's SentencePiece ids.

        text ─ `` '' → " ─ NFKD, accents dropped ─ lower-case ─▶ SentencePiece ─ id order ─▶ ids

    Args:
      model: the serialized SentencePiece model (bytes).
      lowercase: lower-case first (ALBERT's uncased releases).
      strip_accents: decompose (NFKD) and drop combining marks first (ALBERT, XLNet).
      replace_quotes: `` and '' become " first (ALBERT, XLNet: how their training text was cleaned).
      id_map: the model id of each SentencePiece id, where the checkpoint orders its vocabulary
        otherwise (XLM-R: fairseq's `<s> <pad> </s> <unk>` first); None keeps SentencePiece's.
      normalization: "model", the model file's own rules (its NFKC map); "nfc", transformers'
        DeBERTa-v2 tokenizer's in their place (whitespace runs and line breaks one space, NFC,
        trailing whitespace dropped).
    """

    def __init__(
        self, model, lowercase=False, strip_accents=False, replace_quotes=False, id_map=None, normalization="model"
    ):
        super().__init__()
        import sentencepiece

        if normalization not in NORMALIZATIONS:
            raise ValueError(f"SentencePiece normalization must be one of {NORMALIZATIONS}, got {normalization!r}.")
        self.normalization = normalization
        if normalization == "nfc":
            model = without_normalizer_rules(model)

        processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        self.pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        self.lowercase, self.strip_accents, self.replace_quotes = (
            bool(lowercase),
            bool(strip_accents),
            bool(replace_quotes),
        )
        self._id_map = None if id_map is None else tf.constant(np.asarray(id_map, "int32"))
        self._model = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
        self._model._model_resource = _NamedModelResource(model, None)

    def _clean(self, texts):
        if self.normalization == "nfc":
            # transformers' DeBERTa-v2 tokenizer: runs of whitespace and any line break or tab become one
            # space, NFC, trailing whitespace dropped (in place of the model's NFKC rules).
            texts = tf.strings.regex_replace(texts, f"[{WHITESPACE}]{{2,}}|[\n\r\t]", " ")
            texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFC"), f"[{WHITESPACE}]+$", "")
        if self.replace_quotes:
            texts = tf.strings.regex_replace(texts, "``|''", '"')
        if self.strip_accents:
            texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFKD"), r"\p{Mn}", "")
        if self.lowercase:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def tokenize(self, texts):
        """Ids of a batch of strings `[batch]`, ragged int32 `[batch, (pieces)]`."""
        ids = self._model.tokenize(self._clean(tf.convert_to_tensor(texts, tf.string)))
        if self._id_map is not None:
            ids = tf.ragged.map_flat_values(tf.gather, self._id_map, ids)
        return ids
