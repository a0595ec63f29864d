"""The encoder's hyperparameters, validated where they are set."""

import dataclasses
from typing import Optional

from bertlayers.layers.activations import canonical_activation


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Hyperparameters of a BERT or ALBERT encoder (names follow `bert_config.json`'s meaning).

    `embedding_size` is ALBERT's E (factorized embedding); None means E = H. ALBERT applies
    `num_layer_groups` distinct blocks across `num_layers` layers (1 = all layers shared).
    `causal` makes every position attend only to itself and earlier positions (the BERT
    paper's left-to-right ablation). `type_vocab_size` 0 means no segment embedding
    (DistilBERT). `tie_word_embeddings` False gives the output projection of the LM heads a
    matrix of its own instead of the token embedding's transpose (transformers' setting of
    that name). `pooler_activation` is the pooler's (tanh in BERT).
    """

    vocabulary_size: int = 30522
    num_layers: int = 12
    hidden_size: int = 768
    num_heads: int = 12
    intermediate_size: int = 3072
    activation: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    max_sequence_length: int = 512
    type_vocab_size: int = 2
    layer_norm_epsilon: float = 1e-12
    initializer_range: float = 0.02
    norm_first: bool = False
    causal: bool = False
    embedding_size: Optional[int] = None
    num_layer_groups: int = 1
    architecture: str = "bert"
    tie_word_embeddings: bool = True
    pooler_activation: str = "tanh"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            _check_type(field, getattr(self, field.name))
        positive = (
            "vocabulary_size",
            "num_layers",
            "hidden_size",
            "num_heads",
            "intermediate_size",
            "max_sequence_length",
            "num_layer_groups",
        )
        for field in positive:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"EncoderConfig.{field} must be a positive integer, got {value!r}.")
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) or self.type_vocab_size < 0:
            raise ValueError(f"EncoderConfig.type_vocab_size must be a non-negative integer, got {self.type_vocab_size!r}.")
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(f"EncoderConfig.tie_word_embeddings must be True or False, got {self.tie_word_embeddings!r}.")
        if self.embedding_size is not None and (
            isinstance(self.embedding_size, bool)
            or not isinstance(self.embedding_size, int)
            or self.embedding_size <= 0
        ):
            raise ValueError(
                f"EncoderConfig.embedding_size must be a positive integer or None, got {self.embedding_size!r}."
            )
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"EncoderConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_heads ({self.num_heads})."
            )
        for field in ("dropout", "attention_dropout"):
            value = getattr(self, field)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"EncoderConfig.{field} must be in [0, 1), got {value!r}.")
        for field in ("layer_norm_epsilon", "initializer_range"):
            if not getattr(self, field) > 0:
                raise ValueError(f"EncoderConfig.{field} must be > 0, got {getattr(self, field)!r}.")
        for field in ("activation", "pooler_activation"):
            try:
                canonical_activation(getattr(self, field))
            except ValueError as error:
                raise ValueError(f"EncoderConfig.{field}: {error}") from None
        # Which names exist is known once the encoder classes are defined (build_encoder checks).
        if not isinstance(self.architecture, str) or not self.architecture:
            raise ValueError(f"EncoderConfig.architecture must be a name, got {self.architecture!r}.")
        if self.num_layer_groups > self.num_layers:
            raise ValueError(
                f"EncoderConfig.num_layer_groups ({self.num_layer_groups}) cannot exceed "
                f"num_layers ({self.num_layers})."
            )
        if self.architecture == "bert" and self.num_layer_groups != 1:
            raise ValueError("EncoderConfig.num_layer_groups is an ALBERT setting; BERT uses 1.")

    @property
    def head_size(self):
        return self.hidden_size // self.num_heads

    def replace(self, **changes):
        """A validated copy with `changes` applied."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The fields as a dict: the constructor arguments of an encoder of this configuration."""
        return dataclasses.asdict(self)


def _check_type(field, value):
    """A field's value of exactly its declared type: a bool is no int, a string no number (a
    config.json saying `"hidden_dropout_prob": "0.1"` or `"is_decoder": "false"` is refused)."""
    kind, optional = field.type, False
    if kind == Optional[int]:
        kind, optional = int, True
    if optional and value is None:
        return
    if kind is bool:
        right = isinstance(value, bool)
    elif kind is float:
        right = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        right = isinstance(value, kind) and not isinstance(value, bool)
    if not right:
        wanted = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind]
        raise ValueError(f"EncoderConfig.{field.name} must be {wanted}{' or None' if optional else ''}, "
                         f"got {value!r} ({type(value).__name__}).")
