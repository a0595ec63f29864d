"""The encoder, composed: embeddings, a stack of blocks, the outputs (final norm, pooler).

Everything comes from an `EncoderConfig`, each layer's block from its settings
(`EncoderConfig.layer_settings`: attention, window, rotary theta, norm, feed-forward, biases,
chosen by name from the tables of `bertlayers.networks.block_parts`). A family changes a part
by overriding one factory: `make_embeddings` (or sharing an `embedding_layer=`), `make_block`
(or `block_class=`), `make_stack` (blocks that take more than a padding mask), and says where
its pooler reads (`pooling_position`) and whether its layers share blocks (`shares_layers`).
Its `architecture` name is registered when its class is defined (`ENCODERS`).
"""

import dataclasses

import keras

from bertlayers import backend
from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.input_checks import (
    EncoderInputLimits,
    check_integer_ids,
    check_padding_mask,
    check_rank,
    check_same_shape,
)
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.registered import registered_class, registered_name
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.networks.block_parts import NORMALIZATIONS, block_arguments, build_block
from bertlayers.networks.block_stack import INPUT_NAMES, BlockStack, first_positions
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.guarded_model import GuardedModel
from bertlayers.networks.presets import get_preset

__all__ = [
    "ENCODERS",
    "INPUT_NAMES",
    "EncoderBase",
    "block_arguments",
    "embeddings_for",
    "reinitialized",
    "token_embedding_for",
]

# Architecture name -> encoder class, filled as each encoder class is defined.
ENCODERS = {}


class EncoderBase(GuardedModel, keras.Model):
    """A functional encoder model.

    Inputs (int32, each `[batch, seq]`): `token_ids`, `segment_ids` (0 for sentence A, 1 for
    B), `padding_mask` (1 at real tokens, 0 at padding).

    Outputs (a dict):
      sequence_output: `[batch, seq, H]`, the last layer.
      pooled_output: `[batch, H]`, act(W · sequence_output[:, 0]) (at the last real token
        where the pooler reads last).
      encoder_outputs: list of L tensors `[batch, seq, H]`, every layer's output.
      embedding_output: `[batch, seq, H]`, what the first block reads (with `encoder_outputs`,
        the L + 1 hidden states distillation and analysis use).
      attention_scores: list of L `[batch, heads, seq, seq]` attention probabilities, only
        when built with `return_attention_scores=True`.

    Args (besides the `EncoderConfig` fields, `dtype` and `name`):
      embedding_layer: an existing embedding layer to use (and share) instead of building
        one; the config's vocabulary, position and segment sizes are read from it. When its
        width differs from `hidden_size` the encoder adds its own `embedding_projection`.
      block_class: the block class (or its registered name) built at each depth from the
        config's block fields, updated with `block_config`; default `TransformerEncoderBlock`.
      return_attention_scores: also output every layer's attention probabilities.

    Attributes: `config` (EncoderConfig), `embeddings`, `token_embedding` (the tied table),
    `transformer_layers` (the distinct blocks), `stack`, `final_layer_norm`, `pooler`.
    """

    architecture = None
    # Where the pooler reads the sequence ("first": a [CLS] token; "last": the last real token,
    # where a family puts its summary token last, and in any causal encoder).
    pooling_position = "first"
    # Whether `num_layer_groups` blocks serve all the layers (cross-layer sharing); else one block
    # per layer.
    shares_layers = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Only a class that names its own architecture registers: a user's subclass of
        # an encoder (another block, say) must not replace it for every preset of that name.
        if "architecture" in cls.__dict__ and cls.architecture is not None:
            ENCODERS[cls.architecture] = cls

    def __init__(
        self,
        dtype: str | keras.DTypePolicy | None = None,
        name: str | None = None,
        trainable: bool = True,
        embedding_layer: keras.layers.Layer | dict | None = None,
        block_class: type | str | None = None,
        block_config: dict | None = None,
        return_attention_scores: bool = False,
        **config_fields,
    ) -> None:
        dtype = keras.dtype_policies.get(dtype) if dtype is not None else None
        if isinstance(embedding_layer, dict):
            embedding_layer = keras.saving.deserialize_keras_object(embedding_layer)
        config = self._config_of(config_fields, embedding_layer)
        self._block_class = registered_class(block_class, "block_class") if block_class is not None else None
        self._block_config = dict(block_config or {})
        parts = self._make_parts(config, embedding_layer, dtype)
        inputs = parts["stack"].inputs()
        outputs = self._outputs(config, parts, inputs, return_attention_scores)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, trainable=trainable)

        # A functional model does not keep the policy it was given; the layers do. Heads
        # built on this encoder, and get_config, use this one.
        self.layer_dtype_policy = parts["embeddings"].dtype_policy
        self.config = config
        self.embeddings = parts["embeddings"]
        self.embedding_projection = parts["embedding_projection"]
        self.transformer_layers = parts["stack"].blocks
        self.stack = parts["stack"]
        self.final_layer_norm = parts["final_layer_norm"]
        self.pooler = parts["pooler"]
        self.return_attention_scores = bool(return_attention_scores)
        self._embedding_was_given = embedding_layer is not None
        self.input_names = tuple(inputs)

    def _config_of(self, fields, embedding_layer):
        """The `EncoderConfig` of the constructor's fields (an embedding layer given decides its sizes)."""
        fields.pop("architecture", None)
        if embedding_layer is not None:
            # The layer decides the embedding's sizes; the config records them truthfully.
            for field in ("vocabulary_size", "max_sequence_length", "type_vocab_size"):
                fields[field] = getattr(embedding_layer, field)
            fields["embedding_size"] = embedding_layer.embedding_size
            fields["tie_word_embeddings"] = getattr(embedding_layer, "tie_weights", True)
        config = EncoderConfig(architecture=self.architecture, **fields)
        if not self.shares_layers and config.num_layer_groups != 1:
            raise ValueError(
                f"EncoderConfig.num_layer_groups is {config.num_layer_groups}, but {type(self).__name__} builds one "
                f"block per layer (it does not share layers); it takes 1."
            )
        return config

    def _make_parts(self, config, embedding_layer, dtype):
        """The encoder's layers: embeddings (and a projection to H), the stack, final norm, pooler."""
        embeddings = embedding_layer if embedding_layer is not None else self.make_embeddings(config, dtype)
        embedding_projection = None
        if embeddings.compute_output_shape((None, None))[-1] != config.hidden_size:
            # A shared embedding narrower than this encoder (one table at width E shared by
            # encoders of different widths): each encoder projects E -> H itself.
            embedding_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=bert_initializer(config.initializer_range),
                dtype=dtype,
                name="embedding_projection",
            )
        plan = self.block_of_layer(config)
        blocks = [self.make_block(config, index, dtype) for index in range(max(plan) + 1)]
        stack = self.make_stack(config, blocks, plan, dtype)
        for attribute, layer in stack.layers().items():
            setattr(self, attribute, layer)  # tracked (and saved) as the encoder's own
        final_layer_norm = None
        if config.norm_first:
            # Pre-norm blocks leave the residual stream unnormalized; normalize it once at the end.
            final_layer_norm = final_norm(config, dtype)
        pooler = self.make_pooler(config, dtype)
        return {
            "embeddings": embeddings,
            "embedding_projection": embedding_projection,
            "stack": stack,
            "final_layer_norm": final_layer_norm,
            "pooler": pooler,
        }

    def _outputs(self, config, parts, inputs, return_attention_scores):
        """The functional graph from `inputs` to the output dict."""
        # Dimensions: B batch, S sequence, E embedding, H hidden, N heads, L layers.
        x = parts["embeddings"](inputs["token_ids"], inputs["segment_ids"])  # [B, S, E]
        if parts["embedding_projection"] is not None:
            x = parts["embedding_projection"](x)  # [B, S, H]
        embedding_output = x
        stack = parts["stack"](x, inputs, return_attention_scores)
        x, encoder_outputs = stack.sequence_output, list(stack.encoder_outputs)
        final_layer_norm, pooler = parts["final_layer_norm"], parts["pooler"]
        if final_layer_norm is not None:
            x = final_layer_norm(x)
            encoder_outputs[-1] = x
        pooler_input = x
        if pooler.position == "first" and parts["stack"].computes_rows:
            # The pooler reads [CLS] alone, so it gets its own call of the last block that
            # computes only that row. A graph runs only what its outputs need: a classifier
            # never computes the last layer's other rows, a token-level head never this one.
            pooler_input = _last_layer_rows(
                parts["stack"],
                final_layer_norm,
                encoder_outputs,
                embedding_output,
                inputs["padding_mask"],
                first_positions(inputs["padding_mask"]),
            )  # [B, 1, H]
        outputs = {
            "sequence_output": x,  # [B, S, H]
            "pooled_output": pooler(pooler_input, inputs["padding_mask"]),  # [B, H]
            "encoder_outputs": encoder_outputs,  # L x [B, S, H]
            "embedding_output": embedding_output,  # [B, S, H]
            **stack.outputs,
        }
        if return_attention_scores:
            outputs["attention_scores"] = stack.attention_scores  # L x [B, N, S, S]
        return outputs

    # --- The factories a family overrides ---
    def make_embeddings(self, config, dtype):
        """The embedding layer: token + segment + position, factorized (width E, projected to H)
        when `embedding_size` differs from the hidden size."""
        factorized = config.embedding_size not in (None, config.hidden_size)
        return embeddings_for(config, dtype, project_to=config.hidden_size if factorized else None)

    def pooling_of(self, config):
        """Where the pooler reads: the config's `pooling`, else the class's `pooling_position`."""
        if config.pooling_position is not None:
            return config.pooling_position
        # Under causal attention the first token sees only itself: only the last real token has
        # read the whole sequence (GPT's choice for classification).
        return "last" if config.causal else self.pooling_position

    def make_pooler(self, config, dtype):
        """The pooler: act(W · the summary) (a family whose summary is normalized adds its norm)."""
        return Pooler(
            kernel_initializer=bert_initializer(config.initializer_range),
            position=self.pooling_of(config),
            activation=config.pooler_activation,
            dtype=dtype,
            name="pooler",
        )

    def lm_head_arguments(self):
        """`MaskedLMHead` arguments this family's masked-LM head differs in from BERT's (its
        transform's bias, its norm kind): {} here."""
        return {}

    def block_of_layer(self, config):
        """For each layer, the index of the distinct block it applies (`shares_layers`: layer i
        applies block ⌊i·G/L⌋ of G = `num_layer_groups`; else its own)."""
        if not self.shares_layers:
            return tuple(range(config.num_layers))
        plan = tuple(depth * config.num_layer_groups // config.num_layers for depth in range(config.num_layers))
        for index in set(plan):
            kinds = {config.layer_settings(depth) for depth in range(config.num_layers) if plan[depth] == index}
            if len(kinds) > 1:
                raise ValueError(
                    f"EncoderConfig.layer_types: the layers sharing block {index} (num_layer_groups="
                    f"{config.num_layer_groups}) are of different kinds."
                )
        return plan

    def make_block(self, config, index, dtype):
        """The block at distinct index `index`, built from the settings of the layers applying it
        (`block_class` and `block_config` when given). A block is called as `block(x,
        padding_mask=, use_causal_mask=, return_attention_scores=)` (`BlockStack`)."""
        depth = self.block_of_layer(config).index(index)
        return build_block(
            config,
            config.layer_settings(depth),
            dtype,
            f"transformer_layer_{index}",
            block_class=self._block_class,
            block_config={**self.block_config_at(config, depth), **self._block_config},
        )

    def block_config_at(self, config, depth):
        """Block arguments a family sets at one depth that no per-layer setting says (ModernBERT's
        layer 0 reads its already normalized embeddings); the constructor's `block_config` wins."""
        return {}

    def make_stack(self, config, blocks, block_of_layer, dtype):
        """The stack running `blocks` (`BlockStack`; a family whose blocks take other inputs
        returns its own)."""
        return BlockStack(blocks, block_of_layer, causal=config.causal)

    def layers_outside_graph(self):
        """Layers the encoder owns that its own graph never calls (a pretraining-only part):
        models that do not call them leave them out of training."""
        return self.stack.unused_layers()

    # --- Shared API ---
    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            # Extra keys (a task's labels or masked positions) would make Keras match the
            # dict to the inputs by position, silently feeding one input as another.
            inputs = {name: inputs[name] for name in self.input_names if name in inputs}
            # The functional model would silently cast float ids to int32 (truncating them).
            ids = {name: inputs[name] for name in INPUT_NAMES if hasattr(inputs.get(name), "dtype")}
            for name, value in ids.items():
                check_integer_ids(value, name)
                check_rank(value, 2, name, "[batch, seq]")
            inputs.update(check_same_shape(ids))
            if "padding_mask" in ids:
                inputs["padding_mask"] = check_padding_mask(inputs["padding_mask"], real_first=self.reads_first_token)
        return super().call(inputs, training=training, mask=mask)

    @property
    def reads_first_token(self):
        """Whether the summary is read at position 0 ([CLS]): such an encoder refuses left padding."""
        return self.pooler.position == "first"

    def input_value_limits(self):
        """Its ids, segments, length and padding mask (see `GuardedModel`)."""
        config = self.config
        return [
            EncoderInputLimits(
                config.vocabulary_size, config.type_vocab_size, config.max_sequence_length, self.reads_first_token
            )
        ]

    def freeze_lower_layers(self, num_layers):
        """Freeze the embeddings and the first `num_layers` layers; the layers above, the pooler
        and any head built on the encoder keep training (fine-tuning "only certain layers").

        Lower layers carry the most general features and the fewest task-specific ones, so
        freezing them costs little accuracy on small data and saves their gradients' work.
        With ALBERT's cross-layer sharing one block serves many depths: freezing a block that
        also serves a layer above `num_layers` would freeze that layer too, so it is refused.
        Call it before `compile` (Keras reads `trainable` there).
        """
        total = self.config.num_layers
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or not 0 <= num_layers <= total:
            raise ValueError(
                f"num_layers to freeze must be an integer in [0, {total}] (this encoder's layers), got {num_layers!r}."
            )
        plan = self.stack.block_of_layer
        frozen, training = set(plan[:num_layers]), set(plan[num_layers:])
        if frozen & training:
            raise ValueError(
                f"Cannot freeze {num_layers} of {total} layers: their block is shared with the layers above "
                f"(cross-layer sharing, {len(self.transformer_layers)} distinct block(s)); freeze 0 or all {total}."
            )
        self.embeddings.trainable = False
        if self.embedding_projection is not None:
            self.embedding_projection.trainable = False
        for index in sorted(frozen):
            self.transformer_layers[index].trainable = False

    def sequence_over(self, token_ids, segment_ids, stack_inputs, positions=None):
        """The encoder's layers on other inputs than its own model's: (last layer `[B, S, H]`, every
        layer's output, the embedding output). `stack_inputs` go to its stack (a `BlockStack`:
        `padding_mask`, the rows computed; `attention_mask`, `[B, 1 or S, S]`, what each row may
        attend; `positions`): packed rows, or a query's [MASK] rows that attend to the real
        tokens without being attended (`bertlayers.layers.late_interaction.QueryExpansion`). A causal
        encoder's blocks add their left-to-right mask over the row: with packed rows' mask keeping
        each sequence to itself (its tokens contiguous), that is causal attention within each sequence."""
        if type(self.stack).__call__ is not BlockStack.__call__:
            raise ValueError(
                f"{type(self).__name__} computes only its own inputs: its stack is not a BlockStack, which alone "
                "takes rows and attended keys apart."
            )
        where = {} if positions is None else {"positions": positions}
        x = self.embeddings(token_ids, segment_ids, **where)  # [B, S, E]
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)  # [B, S, H]
        embedding_output = x
        stack = self.stack(x, stack_inputs)
        x, encoder_outputs = stack.sequence_output, list(stack.encoder_outputs)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
            encoder_outputs[-1] = x
        return x, encoder_outputs, embedding_output

    def sequence_output_at(self, outputs, positions, padding_mask):
        """`sequence_output` at `positions` `[B, P]`: `[B, P, H]`, computing only those rows
        of the last layer.

        `outputs` is this encoder's output dict in the caller's graph. A masked LM reads the
        last layer at its P masked positions only: this runs the last block on those rows
        (keys and values still span the sequence), and the graph then never computes the full
        last layer unless something else reads `sequence_output`. Families whose stack cannot
        do that gather the rows from `sequence_output`.
        """
        check_integer_ids(positions, "positions")
        if not self.stack.computes_rows:
            return backend.rows_at(outputs["sequence_output"], positions)
        return _last_layer_rows(
            self.stack,
            self.final_layer_norm,
            outputs["encoder_outputs"],
            outputs["embedding_output"],
            padding_mask,
            positions,
        )

    @property
    def token_embedding(self):
        """The `[V, E]` `keras.layers.ReversibleEmbedding` a masked-LM head ties to."""
        return self.embeddings.token_embedding

    @classmethod
    def from_preset(cls, name, **overrides):
        """An encoder with the architecture of preset `name`, randomly initialized; `overrides`
        change `EncoderConfig` fields (`num_layers=4`) or go to the constructor
        (`return_attention_scores=True`, `dtype`, `name`).

        Unlike keras-hub's `from_preset`, no weights are loaded: pretrained weights come from a
        checkpoint folder through `bertlayers.convert.load_checkpoint(folder)` (or `load_encoder`)."""
        config = get_preset(name)
        if config.architecture != cls.architecture:
            raise ValueError(
                f"Preset {name!r} is a {config.architecture} architecture; use "
                f"bertlayers.networks.build_encoder({name!r}) or the matching encoder class."
            )
        fields = {f.name for f in dataclasses.fields(config)}
        changes = {key: value for key, value in overrides.items() if key in fields}
        arguments = {key: value for key, value in overrides.items() if key not in fields}
        return cls.from_encoder_config(config.replace(**changes), **arguments)

    @classmethod
    def from_encoder_config(cls, config, **kwargs):
        """An encoder with the sizes of `config` (an `EncoderConfig`); kwargs go to the constructor (`dtype`, `name`)."""
        return cls(**config.to_dict(), **kwargs)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.layer_dtype_policy),
        }
        config.update(self.config.to_dict())
        config.pop("architecture")
        if self._embedding_was_given:
            config["embedding_layer"] = keras.saving.serialize_keras_object(self.embeddings)
        if self._block_class is not None:
            config["block_class"] = keras.saving.get_registered_name(self._block_class)
        if self._block_config:
            config["block_config"] = self._block_config
        if self.return_attention_scores:
            config["return_attention_scores"] = True
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def final_norm(config, dtype=None):
    """The norm closing a pre-norm stack, of the last layer's normalization kind."""
    normalization = NORMALIZATIONS.get(config.layer_settings(config.num_layers - 1).normalization)
    return (normalization or keras.layers.LayerNormalization)(
        epsilon=config.layer_norm_epsilon, dtype=dtype, name="final_layer_norm"
    )


def _last_layer_rows(stack, final_layer_norm, encoder_outputs, embedding_output, padding_mask, positions):
    """The last layer's output `[B, P, H]` at `positions` `[B, P]` only, run on that layer's input
    (the layer before's output, or the embeddings of a one-layer encoder)."""
    last_input = encoder_outputs[-2] if len(encoder_outputs) > 1 else embedding_output  # [B, S, H]
    rows = stack.rows_at(last_input, padding_mask, positions)  # [B, P, H]
    return rows if final_layer_norm is None else final_layer_norm(rows)


def embeddings_for(config, dtype=None, project_to=None):
    """The token + segment + position embedding of `config`, at width `embedding_size` (default
    the hidden size); with `project_to`, ALBERT's factorized form projecting to that width.
    Without `learned_positions`, token + segment alone; normalized by the config's norm kind."""
    common = dict(
        vocabulary_size=config.vocabulary_size,
        max_sequence_length=config.max_sequence_length,
        type_vocab_size=config.type_vocab_size,
        layer_norm_epsilon=config.layer_norm_epsilon,
        dropout=config.dropout,
        initializer=bert_initializer(config.initializer_range),
        tie_weights=config.tie_word_embeddings,
        dtype=dtype,
        name="embeddings",
    )
    normalization = NORMALIZATIONS.get(config.normalization)  # None: LayerNorm
    if project_to is not None:
        if normalization is not None or not config.learned_positions:
            raise ValueError(
                "EncoderConfig: a factorized embedding (embedding_size differs from hidden_size) takes learned "
                "positions and LayerNorm."
            )
        return FactorizedEmbedding(embedding_size=config.embedding_size, hidden_size=project_to, **common)
    return BertEmbeddings(
        embedding_size=config.embedding_size or config.hidden_size,
        learned_positions=config.learned_positions,
        normalization=registered_name(normalization) if normalization is not None else None,
        **common,
    )


def token_embedding_for(config, dtype=None, layer_class=None):
    """The token table alone (`TokenEmbedding`, width H, or `layer_class`, a subclass of it): for
    encoders whose positions enter through attention and whose embeddings have no norm (XLNet,
    EuroBERT)."""
    return (layer_class or TokenEmbedding)(
        vocabulary_size=config.vocabulary_size,
        embedding_size=config.hidden_size,
        max_sequence_length=config.max_sequence_length,
        type_vocab_size=config.type_vocab_size,
        dropout=config.dropout,
        initializer=bert_initializer(config.initializer_range),
        tie_weights=config.tie_word_embeddings,
        dtype=dtype,
        name="embeddings",
    )


def reinitialized(encoder: keras.Model, seed: int | None = None) -> keras.Model:
    """An encoder of the same architecture with fresh random weights (the no-pretraining baseline)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return type(encoder).from_config(encoder.get_config())
