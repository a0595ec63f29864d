"""What every encoder shares: inputs, embeddings, the stack of blocks, the pooler, outputs.

A family plugs in through these seams: its own embedding layer (`embedding_layer=`, shared
between models as ELECTRA's generator and discriminator share theirs, or `_make_embeddings`),
its own block (`make_block` / `block_class`), its own stack when its blocks take more than
a padding mask (`_run_blocks`: XLNet's relative positions and memory, with `_make_inputs`
for extra inputs), where the pooler reads (`pooling_position`), and its architecture name,
registered when its class is defined (`ENCODERS`).
"""

import dataclasses

import keras
from keras import ops

from bertlayers.layers.activations import with_activation_renamed
from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.input_checks import (
    check_encoder_values,
    check_integer_ids,
    check_padding_mask,
    check_rank,
    check_same_shape,
)
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.guarded_model import GuardedModel
from bertlayers.networks.presets import get_preset

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")

# Architecture name -> encoder class, filled as each encoder class is defined.
ENCODERS = {}


class EncoderBase(GuardedModel, keras.Model):
    """A functional encoder model.

    Inputs (int32, each `[batch, seq]`): `token_ids`, `segment_ids` (0 for sentence A, 1 for
    B), `padding_mask` (1 at real tokens, 0 at padding).

    Outputs (a dict):
      sequence_output: `[batch, seq, H]`, the last layer.
      pooled_output: `[batch, H]`, tanh(W · sequence_output[:, 0]).
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

    Subclasses provide the embedding layer and the block applied at each depth; everything
    else (inputs, masking, pooling, config round trip) lives here once.

    Attributes: `config` (EncoderConfig), `embeddings`, `token_embedding` (the tied table),
    `transformer_layers` (the distinct blocks), `pooler`.
    """

    architecture = None
    # Where the pooler reads the sequence ("first": BERT's [CLS]; "last": XLNet's, and any
    # causal encoder's).
    pooling_position = "first"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Only a class that names its own architecture registers: a user's subclass of
        # BertEncoder (another block, say) must not replace BertEncoder for every "bert" preset.
        if "architecture" in cls.__dict__ and cls.architecture is not None:
            ENCODERS[cls.architecture] = cls

    def __init__(
        self,
        dtype=None,
        name=None,
        trainable=True,
        embedding_layer=None,
        block_class=None,
        block_config=None,
        return_attention_scores=False,
        **config_fields,
    ):
        config_fields.pop("architecture", None)
        dtype = keras.dtype_policies.get(dtype) if dtype is not None else None
        if isinstance(embedding_layer, dict):
            embedding_layer = keras.saving.deserialize_keras_object(embedding_layer)
        if embedding_layer is not None:
            # The layer decides the embedding's sizes; the config records them truthfully.
            for field in ("vocabulary_size", "max_sequence_length", "type_vocab_size"):
                config_fields[field] = getattr(embedding_layer, field)
            config_fields["embedding_size"] = embedding_layer.embedding_size
            config_fields["tie_word_embeddings"] = getattr(embedding_layer, "tie_weights", True)
        config = EncoderConfig(architecture=self.architecture, **config_fields)
        self._block_class = _registered_class(block_class) if block_class is not None else None
        self._block_config = dict(block_config or {})

        # === Layers ===
        embeddings = embedding_layer if embedding_layer is not None else self._make_embeddings(config, dtype)
        embedding_width = embeddings.compute_output_shape((None, None))[-1]
        embedding_projection = None
        if embedding_width != config.hidden_size:
            # A shared embedding narrower than this encoder (ELECTRA's generator and
            # discriminator share one table at width E): each encoder projects E -> H itself.
            embedding_projection = keras.layers.Dense(
                config.hidden_size,
                kernel_initializer=bert_initializer(config.initializer_range),
                dtype=dtype,
                name="embedding_projection",
            )
        blocks = [self.make_block(config, index, dtype) for index in range(self._num_distinct_blocks(config))]
        final_layer_norm = None
        if config.norm_first:
            # Pre-LN blocks leave the residual stream unnormalized; normalize it once at the end.
            final_layer_norm = keras.layers.LayerNormalization(
                epsilon=config.layer_norm_epsilon, dtype=dtype, name="final_layer_norm"
            )
        pooler = Pooler(
            kernel_initializer=bert_initializer(config.initializer_range),
            # Under causal attention the first token sees only itself: only the last real
            # token has read the whole sequence (GPT's choice for classification).
            position="last" if config.causal else self.pooling_position,
            activation=config.pooler_activation,
            dtype=dtype,
            name="pooler",
        )

        # === Functional graph ===
        # Dimensions: B batch, S sequence, H hidden, N heads, L layers.
        inputs = self._make_inputs(config)
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])  # [B, S, E]
        if embedding_projection is not None:
            x = embedding_projection(x)  # [B, S, H]
        embedding_output = x
        x, encoder_outputs, attention_scores, stack_outputs = self._run_blocks(
            x, inputs, blocks, config, return_attention_scores
        )
        if final_layer_norm is not None:
            x = final_layer_norm(x)
            encoder_outputs[-1] = x
        pooler_input = x
        if pooler.position == "first" and self._computes_last_layer_rows(blocks):
            # The pooler reads [CLS] alone, so it gets its own call of the last block that
            # computes only that row. A graph runs only what its outputs need: a classifier
            # never computes the last layer's other rows, a token-level head never this one.
            first = ops.zeros_like(inputs["padding_mask"][:, :1])  # [B, 1]
            pooler_input = self._last_layer_rows(
                config, blocks, final_layer_norm, encoder_outputs, embedding_output, inputs["padding_mask"], first
            )  # [B, 1, H]
        outputs = {
            "sequence_output": x,  # [B, S, H]
            "pooled_output": pooler(pooler_input, inputs["padding_mask"]),  # [B, H]
            "encoder_outputs": encoder_outputs,  # L x [B, S, H]
            "embedding_output": embedding_output,  # [B, S, H]
            **stack_outputs,
        }
        if return_attention_scores:
            outputs["attention_scores"] = attention_scores  # L x [B, N, S, S]
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, trainable=trainable)

        # A functional model does not keep the policy it was given; the layers do. Heads
        # built on this encoder, and get_config, use this one.
        self.layer_dtype_policy = embeddings.dtype_policy
        self.config = config
        self.embeddings = embeddings
        self.embedding_projection = embedding_projection
        self.transformer_layers = blocks
        self.final_layer_norm = final_layer_norm
        self.pooler = pooler
        self.return_attention_scores = bool(return_attention_scores)
        self._embedding_was_given = embedding_layer is not None
        self.input_names = tuple(inputs)

    # --- What subclasses decide ---
    def _factorizes_embedding(self, config):
        """Whether tokens are embedded at width E and projected to H."""
        raise NotImplementedError

    def _make_embeddings(self, config, dtype):
        return embeddings_for(config, dtype, project_to=config.hidden_size if self._factorizes_embedding(config) else None)

    def make_block(self, config, index, dtype):
        """The block at distinct index `index` (the factory hook: a family with its own block,
        relative or two-stream attention say, overrides this or passes `block_class`).

        A block is called as `block(x, padding_mask=, use_causal_mask=, return_attention_scores=)`.
        `block_class` is built from the config's block fields updated with `block_config`.
        """
        arguments = {**block_arguments(config), "norm_first": config.norm_first, **self._block_config}
        block_class = self._block_class or TransformerEncoderBlock
        return block_class(**arguments, dtype=dtype, name=f"transformer_layer_{index}")

    def _make_inputs(self, config):
        """The model's `keras.Input`s by name: `INPUT_NAMES`, int32 `[batch, seq]`."""
        return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}

    def _run_blocks(self, x, inputs, blocks, config, return_attention_scores):
        """The stack over the embedded sequence `x` `[B, S, H]`.

        Returns the last layer's output, every layer's output, every layer's attention
        probabilities (when asked) and any further outputs {name: tensor} of the family's.
        A family whose blocks take other arguments (relative positions, two streams)
        overrides this.
        """
        encoder_outputs, attention_scores = [], []
        for depth in range(config.num_layers):
            x = blocks[self._block_index(config, depth)](
                x,
                padding_mask=inputs["padding_mask"],
                use_causal_mask=config.causal,
                return_attention_scores=return_attention_scores,
            )
            if return_attention_scores:
                x, scores = x
                attention_scores.append(scores)  # [B, N, S, S]
            encoder_outputs.append(x)  # [B, S, H]
        return x, encoder_outputs, attention_scores, {}

    def _computes_last_layer_rows(self, blocks):
        """Whether the last layer can be run on chosen rows alone: BERT's stack (a family's own
        `_run_blocks` may call its blocks otherwise) whose last block says it can
        (`TransformerEncoderBlock.computes_rows`: its attention is told the queries' positions)."""
        return type(self)._run_blocks is EncoderBase._run_blocks and bool(getattr(blocks[-1], "computes_rows", False))

    def _last_layer_rows(self, config, blocks, final_layer_norm, encoder_outputs, embedding_output, padding_mask, positions):
        """The last layer's output `[B, P, H]` at `positions` `[B, P]` only, run on that layer's
        input (the layer before's output, or the embeddings of a one-layer encoder)."""
        last_input = encoder_outputs[-2] if config.num_layers > 1 else embedding_output  # [B, S, H]
        last_block = blocks[self._block_index(config, config.num_layers - 1)]
        rows = last_block(
            last_input, padding_mask=padding_mask, use_causal_mask=config.causal, output_positions=positions
        )  # [B, P, H]
        return rows if final_layer_norm is None else final_layer_norm(rows)

    def layers_outside_graph(self):
        """Layers the encoder owns that its own graph never calls (XLNet's query-stream mask
        embedding): models that do not call them leave them out of training."""
        return []

    def _num_distinct_blocks(self, config):
        return config.num_layers

    def _block_index(self, config, depth):
        return depth

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

    def check_input_values(self, inputs, prefix=""):
        """Ids, segments, length and padding mask of concrete inputs ({prefix + name: NumPy array})
        within this encoder's limits (see `GuardedModel`)."""
        config = self.config
        check_encoder_values(inputs, config.vocabulary_size, config.type_vocab_size, config.max_sequence_length,
                             real_first=self.reads_first_token, prefix=prefix)

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
            raise ValueError(f"num_layers to freeze must be an integer in [0, {total}] (this encoder's layers), got {num_layers!r}.")
        frozen = {self._block_index(self.config, depth) for depth in range(num_layers)}
        training = {self._block_index(self.config, depth) for depth in range(num_layers, total)}
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
        config = self.config
        if not self._computes_last_layer_rows(self.transformer_layers):
            return ops.take_along_axis(outputs["sequence_output"], ops.expand_dims(positions, -1), axis=1)
        return self._last_layer_rows(
            config, self.transformer_layers, self.final_layer_norm, outputs["encoder_outputs"],
            outputs["embedding_output"], padding_mask, positions,
        )

    @property
    def token_embedding(self):
        """The `[V, E]` `keras.layers.ReversibleEmbedding` a masked-LM head ties to."""
        return self.embeddings.token_embedding

    @classmethod
    def from_preset(cls, name, **overrides):
        """An encoder with the architecture of preset `name` (randomly initialized); `overrides`
        change `EncoderConfig` fields (`num_layers=4`) or go to the constructor
        (`return_attention_scores=True`, `dtype`, `name`)."""
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
        config = with_activation_renamed(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def block_arguments(config):
    """The config's fields every block takes (sizes, activation, dropout, LayerNorm, initializer)."""
    return dict(
        num_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        activation=config.activation,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        layer_norm_epsilon=config.layer_norm_epsilon,
        kernel_initializer=bert_initializer(config.initializer_range),
    )


def embeddings_for(config, dtype=None, project_to=None):
    """The token + segment + position embedding of `config`, at width `embedding_size` (default
    the hidden size); with `project_to`, ALBERT's factorized form projecting to that width."""
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
    if project_to is not None:
        return FactorizedEmbedding(embedding_size=config.embedding_size, hidden_size=project_to, **common)
    return BertEmbeddings(embedding_size=config.embedding_size or config.hidden_size, **common)


def _registered_class(block_class):
    """A layer class, given as itself or by its registered name ("bertlayers>Name")."""
    if isinstance(block_class, str):
        found = keras.saving.get_registered_object(block_class)
        if found is None:
            raise ValueError(f"No registered layer class named {block_class!r} (block_class).")
        return found
    return block_class


def reinitialized(encoder, seed=None):
    """An encoder of the same architecture with fresh random weights (the no-pretraining baseline)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return type(encoder).from_config(encoder.get_config())
