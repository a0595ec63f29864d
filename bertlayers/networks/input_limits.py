"""What a model built from the library's layers accepts as ids: found on its embedding layer."""

import dataclasses

from bertlayers import backend
from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.networks.encoder_base import EncoderBase


@dataclasses.dataclass(frozen=True)
class InputLimits:
    """Token ids lie in [0, vocabulary_size), segment ids in [0, type_vocab_size), and a sequence
    is at most max_sequence_length long."""

    vocabulary_size: int
    type_vocab_size: int
    max_sequence_length: int

    def check_sequence_length(self, length: int, what: str = "sequence_length") -> int:
        """`length`, or a ValueError where the model takes fewer positions (before any work: past
        them the position lookup fails deep inside a graph)."""
        if int(length) > self.max_sequence_length:
            raise ValueError(
                f"{what} {int(length)} exceeds the model's {self.max_sequence_length} positions "
                f"(its max_sequence_length); use {self.max_sequence_length} or less."
            )
        return int(length)


def input_limits(model):
    """The `InputLimits` of `model`: those of its first bertlayers encoder, else of its first
    `BertEmbeddings` (a model composed from the layers), searched through nested models.

    Raises:
      ValueError: `model` holds neither, so nothing says which ids it accepts.
    """
    for layer in backend.flatten_layers(model):
        if isinstance(layer, EncoderBase):
            config = layer.config
            return InputLimits(config.vocabulary_size, config.type_vocab_size, config.max_sequence_length)
        if isinstance(layer, BertEmbeddings):
            return InputLimits(layer.vocabulary_size, layer.type_vocab_size, layer.max_sequence_length)
    raise ValueError(
        f"{type(model).__name__} {model.name!r} holds no bertlayers encoder or BertEmbeddings layer, so "
        "nothing says which token ids it accepts; build it from the library's embeddings or an encoder."
    )
