"""The encoder's hyperparameters, validated where they are set, with the settings of each layer."""

import dataclasses
from typing import Optional

from bertlayers.layers.activations import canonical_activation
from bertlayers.layers.pooler import POOLING_POSITIONS as POOLINGS
from bertlayers.utils.options import check_options, option
from bertlayers.utils.validation import DROPOUT, NON_NEGATIVE_FLOAT, NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT

# The fields a layer may set for itself (`layer_kinds`); the others hold for the whole encoder.
PER_LAYER_FIELDS = (
    "attention",
    "num_key_value_heads",
    "attention_window",
    "rotary_theta",
    "normalization",
    "feed_forward",
    "use_bias",
    "norm_first",
    "num_experts",
    "experts_per_token",
    "shared_expert_size",
    "router_aux_loss_weight",
    "query_key_norm",
)


@dataclasses.dataclass(frozen=True)
class LayerSettings:
    """What one layer of the stack is built with (the per-layer fields of `EncoderConfig`)."""

    attention: str
    num_key_value_heads: Optional[int]
    attention_window: Optional[int]
    rotary_theta: Optional[float]
    normalization: str
    feed_forward: str
    use_bias: bool
    norm_first: bool
    num_experts: Optional[int] = None
    experts_per_token: int = 2
    shared_expert_size: Optional[int] = None
    router_aux_loss_weight: float = 0.01
    query_key_norm: bool = False
    # Whole-encoder values a part reads: the norms' epsilon (for the query/key norms an attention
    # builds inside itself) and the attention's score scale (None: 1 / sqrt(head size)).
    layer_norm_epsilon: float = 1e-12
    attention_scale: Optional[float] = None


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
      that name). `pooler_activation` is the pooler's (tanh in BERT); `pooling_position` where it reads
      ("first" token, "last" real token, "mean" of the real tokens, "late" the mean of each token's act(W · x); None: the class's own).
      `learned_positions` False leaves the position table out (positions enter through rotary
      attention alone: ModernBERT, GTE, NomicBERT, EuroBERT). `head_dim` sets each head's width
      apart from H / heads; `attention_scale` the scores' factor apart from 1 / sqrt(head_dim);
      `post_sublayer_norm` adds a norm on the attention's and the feed-forward network's outputs
      before each residual sum (Gemma 2 and 3: pre- and post-norms around each sublayer).

    Each layer (defaults for all, changed per layer by `layer_types` and `layer_kinds`):
      `attention`: the attention implementation, by its name in the encoder's table
        (`bertlayers.networks.block_parts`; "multi_head" is softmax attention over all keys).
      `num_key_value_heads`: grouped-query attention (keys and values in that many heads, each
        shared by num_heads / it query heads; EuroBERT); None: one per query head.
      `attention_window`: local attention over a window of that many tokens; None: global.
      `rotary_theta`: the base of rotary position embedding (for attentions that rotate).
      `normalization`: "layer_norm", "rms_norm", or a registered name of the table.
      `feed_forward`: "dense" (W2 · act(W1 · x)), "gated" (GLU), or a registered name.
      `use_bias`: biases on the block's dense projections.
      `query_key_norm`: a norm (the layer's `normalization`, RMSNorm where that is LayerNorm) over
        each head's queries and keys before they are rotated and scored (Qwen3, Gemma 3; its
        epsilon `layer_norm_epsilon`).
      `norm_first`: pre-normalization (a final norm closes the stack) instead of post.
      `num_experts`, `experts_per_token`, `shared_expert_size`, `router_aux_loss_weight`: the
        mixture of experts of `feed_forward` "moe" (`bertlayers.layers.MixtureOfExperts`: that many
        experts of `intermediate_size`, each token routed to `experts_per_token` of them, an
        expert every token also takes where `shared_expert_size` is set, and the load-balancing
        loss's weight in training).
      `layer_types`: one kind name per layer (as the modern checkpoints' `layer_types`:
        "full_attention", "sliding_attention", ...); `layer_kinds`: {kind: {field: value}}, the
        per-layer fields a kind changes. None: every layer as the defaults say.
    """

    vocabulary_size: int = option(30522, "token ids the embedding takes", POSITIVE_INT)
    num_layers: int = option(12, "layers L", POSITIVE_INT)
    hidden_size: int = option(768, "width H of every layer", POSITIVE_INT)
    num_heads: int = option(12, "attention heads (H must be divisible by them unless head_dim is set)", POSITIVE_INT)
    head_dim: Optional[int] = option(
        None, "width of each attention head (None: H / heads; Qwen3 and Gemma 3 set their own)", POSITIVE_INT
    )
    intermediate_size: int = option(3072, "inner width of the feed-forward network", POSITIVE_INT)
    activation: str = option("gelu", "the feed-forward network's activation")
    dropout: float = option(0.1, "dropout on embeddings and sublayer outputs", DROPOUT)
    attention_dropout: float = option(0.1, "dropout on the attention probabilities", DROPOUT)
    max_sequence_length: int = option(512, "positions the encoder takes", POSITIVE_INT)
    type_vocab_size: int = option(2, "segment ids (0: no segment embedding)", NON_NEGATIVE_INT)
    layer_norm_epsilon: float = option(1e-12, "the norms' epsilon", POSITIVE_FLOAT)
    initializer_range: float = option(0.02, "standard deviation of the truncated-normal initializer", POSITIVE_FLOAT)
    norm_first: bool = option(False, "pre-normalization (a final norm closes the stack)")
    causal: bool = option(False, "left-to-right attention")
    embedding_size: Optional[int] = option(None, "the token table's width E (None: H)", POSITIVE_INT)
    num_layer_groups: int = option(1, "distinct blocks where the encoder shares layers", POSITIVE_INT)
    architecture: str = option("bert", "the encoder class's registered name")
    tie_word_embeddings: bool = option(True, "LM heads project with the token table's transpose")
    pooler_activation: str = option("tanh", "the pooler's activation")
    attention: str = option("multi_head", "the attention implementation, by its name in the table")
    num_key_value_heads: Optional[int] = option(
        None, "grouped-query attention: key/value heads, each shared by a group of query heads", POSITIVE_INT
    )
    attention_window: Optional[int] = option(None, "local attention over this many tokens (None: global)", POSITIVE_INT)
    rotary_theta: Optional[float] = option(None, "base of rotary position embedding", POSITIVE_FLOAT)
    normalization: str = option("layer_norm", "the norm, by its name in the table")
    feed_forward: str = option("dense", "the feed-forward network, by its name in the table")
    use_bias: bool = option(True, "biases on the block's dense projections")
    learned_positions: bool = option(True, "a learned position table added to the input (false: rotary only)")
    pooling_position: Optional[str] = option(
        None, "where the pooler reads: first, last or mean (None: the encoder class's own)", choices=POOLINGS
    )
    num_experts: Optional[int] = option(
        None, "experts of a mixture-of-experts feed-forward (feed_forward moe)", POSITIVE_INT
    )
    experts_per_token: int = option(2, "experts each token is routed to (feed_forward moe)", POSITIVE_INT)
    shared_expert_size: Optional[int] = option(
        None, "inner width of an expert every token also takes (feed_forward moe; None: none)", POSITIVE_INT
    )
    router_aux_loss_weight: float = option(
        0.01, "weight of the mixture of experts' load-balancing loss", NON_NEGATIVE_FLOAT
    )
    query_key_norm: bool = option(False, "RMSNorm over each head's queries and keys before scoring")
    attention_scale: Optional[float] = option(
        None, "the factor of the attention scores (None: 1 / sqrt(head size))", POSITIVE_FLOAT
    )
    post_sublayer_norm: bool = option(
        False, "a norm on each sublayer's output before the residual sum too (Gemma's sandwich norms)"
    )
    layer_types: Optional[tuple] = option(None, "one kind name per layer")
    layer_kinds: Optional[dict] = option(None, "{kind: {per-layer field: value}}")

    def __post_init__(self):
        if isinstance(self.layer_types, list):  # read back from JSON
            object.__setattr__(self, "layer_types", tuple(self.layer_types))
        for field in dataclasses.fields(self):
            _check_type(field, getattr(self, field.name))
        check_options(self, prefix="EncoderConfig.")
        if self.num_key_value_heads is not None and self.num_heads % self.num_key_value_heads:
            raise ValueError(
                f"EncoderConfig.num_key_value_heads ({self.num_key_value_heads}) must divide num_heads "
                f"({self.num_heads})."
            )
        if self.head_dim is None and self.hidden_size % self.num_heads:
            raise ValueError(
                f"EncoderConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})."
            )
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
        for field in ("attention", "normalization", "feed_forward"):
            if not getattr(self, field):
                raise ValueError(f"EncoderConfig.{field} must be a name, got {getattr(self, field)!r}.")
        if self.feed_forward == "moe" and self.num_experts is None:
            raise ValueError("EncoderConfig.feed_forward 'moe' needs num_experts (the experts of each such layer).")
        if self.num_experts is not None and self.experts_per_token > self.num_experts:
            raise ValueError(
                f"EncoderConfig.experts_per_token ({self.experts_per_token}) cannot exceed num_experts "
                f"({self.num_experts})."
            )
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
        fields = {field: changes.get(field, getattr(self, field)) for field in PER_LAYER_FIELDS}
        return LayerSettings(**fields, layer_norm_epsilon=self.layer_norm_epsilon, attention_scale=self.attention_scale)

    @property
    def head_size(self):
        """Each attention head's width: `head_dim`, else H / heads."""
        return self.head_dim or self.hidden_size // self.num_heads

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
