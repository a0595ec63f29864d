"""The encoder's hyperparameters, validated where they are set, with the settings of each layer."""

import dataclasses
from typing import Optional

from bertlayers.layers.activations import canonical_activation
from bertlayers.layers.masking import check_attention_window

# The fields a layer may set for itself (`layer_kinds`); the others hold for the whole encoder.
PER_LAYER_FIELDS = (
    "attention",
    "attention_window",
    "rotary_theta",
    "normalization",
    "feed_forward",
    "use_bias",
    "norm_first",
)


@dataclasses.dataclass(frozen=True)
class LayerSettings:
    """What one layer of the stack is built with (the per-layer fields of `EncoderConfig`)."""

    attention: str
    attention_window: Optional[int]
    rotary_theta: Optional[float]
    normalization: str
    feed_forward: str
    use_bias: bool
    norm_first: bool


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Hyperparameters of an encoder (names follow `bert_config.json`'s meaning).

    The whole encoder:
      `embedding_size` is the token table's width E (factorized embedding); None means E = H.
      `num_layer_groups` (G): in an encoder that shares blocks across layers (its class says
      `shares_layers`), G distinct blocks serve the `num_layers` (L) layers, layer i applying
      block ⌊i·G/L⌋ (G = 1: one block for all); an encoder of distinct blocks takes 1. `causal` makes every position attend only to itself and earlier
      positions (the BERT paper's left-to-right ablation). `type_vocab_size` 0 means no segment
      embedding. `tie_word_embeddings` False gives the output projection of the LM heads a
      matrix of its own instead of the token embedding's transpose (transformers' setting of
      that name). `pooler_activation` is the pooler's (tanh in BERT).

    Each layer (defaults for all, changed per layer by `layer_types` and `layer_kinds`):
      `attention`: the attention implementation, by its name in the encoder's table
        (`bertlayers.networks.block_parts`; "multi_head" is softmax attention over all keys).
      `attention_window`: local attention over a window of that many tokens; None: global.
      `rotary_theta`: the base of rotary position embedding (for attentions that rotate).
      `normalization`: "layer_norm", "rms_norm", or a registered name of the table.
      `feed_forward`: "dense" (W2 · act(W1 · x)), "gated" (GLU), or a registered name.
      `use_bias`: biases on the block's dense projections.
      `norm_first`: pre-normalization (a final norm closes the stack) instead of post.
      `layer_types`: one kind name per layer (as the modern checkpoints' `layer_types`:
        "full_attention", "sliding_attention", ...); `layer_kinds`: {kind: {field: value}}, the
        per-layer fields a kind changes. None: every layer as the defaults say.
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
    attention: str = "multi_head"
    attention_window: Optional[int] = None
    rotary_theta: Optional[float] = None
    normalization: str = "layer_norm"
    feed_forward: str = "dense"
    use_bias: bool = True
    layer_types: Optional[tuple] = None
    layer_kinds: Optional[dict] = None

    def __post_init__(self):
        if isinstance(self.layer_types, list):  # read back from JSON
            object.__setattr__(self, "layer_types", tuple(self.layer_types))
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
        if (
            isinstance(self.type_vocab_size, bool)
            or not isinstance(self.type_vocab_size, int)
            or self.type_vocab_size < 0
        ):
            raise ValueError(
                f"EncoderConfig.type_vocab_size must be a non-negative integer, got {self.type_vocab_size!r}."
            )
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(
                f"EncoderConfig.tie_word_embeddings must be True or False, got {self.tie_word_embeddings!r}."
            )
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
                f"EncoderConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})."
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
        check_attention_window(self.attention_window)
        if self.rotary_theta is not None and not self.rotary_theta > 0:
            raise ValueError(f"EncoderConfig.rotary_theta must be > 0 or None, got {self.rotary_theta!r}.")
        for field in ("attention", "normalization", "feed_forward"):
            if not getattr(self, field):
                raise ValueError(f"EncoderConfig.{field} must be a name, got {getattr(self, field)!r}.")
        self._check_layer_types()

    def _check_layer_types(self):
        kinds = self.layer_kinds or {}
        if self.layer_types is None:
            if kinds:
                raise ValueError("EncoderConfig.layer_kinds is set but layer_types is not: name each layer's kind.")
            return
        if len(self.layer_types) != self.num_layers:
            raise ValueError(
                f"EncoderConfig.layer_types names {len(self.layer_types)} layers; the encoder has "
                f"num_layers={self.num_layers}."
            )
        for kind, changes in kinds.items():
            if not isinstance(changes, dict):
                raise ValueError(
                    f"EncoderConfig.layer_kinds[{kind!r}] must be a dict of per-layer fields, got {changes!r}."
                )
            unknown = sorted(set(changes) - set(PER_LAYER_FIELDS))
            if unknown:
                raise ValueError(
                    f"EncoderConfig.layer_kinds[{kind!r}] sets {', '.join(unknown)}; a layer may set "
                    f"only {', '.join(PER_LAYER_FIELDS)}."
                )
            try:  # each kind's values checked as the whole encoder's would be
                dataclasses.replace(self, layer_types=None, layer_kinds=None, **changes)
            except ValueError as error:
                raise ValueError(f"EncoderConfig.layer_kinds[{kind!r}]: {error}") from None
        for depth, kind in enumerate(self.layer_types):
            if not isinstance(kind, str) or (kind not in kinds and kinds):
                raise ValueError(
                    f"EncoderConfig.layer_types[{depth}] is {kind!r}, not a kind of layer_kinds "
                    f"({', '.join(sorted(kinds)) or 'none'})."
                )

    def layer_settings(self, depth):
        """The `LayerSettings` of the layer at `depth` (0 is the first)."""
        changes = {}
        if self.layer_types is not None:
            changes = (self.layer_kinds or {}).get(self.layer_types[depth], {})
        return LayerSettings(**{field: changes.get(field, getattr(self, field)) for field in PER_LAYER_FIELDS})

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
    for inner in (int, float, tuple, dict):
        if kind == Optional[inner]:
            kind, optional = inner, True
    if optional and value is None:
        return
    if kind is bool:
        right = isinstance(value, bool)
    elif kind is float:
        right = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        right = isinstance(value, kind) and not isinstance(value, bool)
    if not right:
        wanted = {
            bool: "true or false",
            int: "an integer",
            float: "a number",
            str: "a string",
            tuple: "a list",
            dict: "a mapping",
        }[kind]
        raise ValueError(
            f"EncoderConfig.{field.name} must be {wanted}{' or None' if optional else ''}, "
            f"got {value!r} ({type(value).__name__})."
        )
