"""What BERT and ALBERT encoders share: inputs, the stack of blocks, the pooler, outputs."""

import keras

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.factorized_embedding import FactorizedEmbedding
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.input_checks import check_integer_ids, check_rank, check_same_shape
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import get_preset

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class EncoderBase(keras.Model):
    """A functional encoder model.

    Inputs (int32, each `[batch, seq]`): `token_ids`, `segment_ids` (0 for sentence A, 1 for
    B), `padding_mask` (1 at real tokens, 0 at padding).

    Outputs (a dict):
      sequence_output: `[batch, seq, H]`, the last layer.
      pooled_output: `[batch, H]`, tanh(W · sequence_output[:, 0]).
      encoder_outputs: list of L tensors `[batch, seq, H]`, every layer's output.

    Subclasses provide the embedding layer and the block applied at each depth; everything
    else (inputs, masking, pooling, config round trip) lives here once.

    Attributes: `config` (EncoderConfig), `embeddings`, `token_embedding` (the tied table),
    `transformer_layers` (the distinct blocks), `pooler`.
    """

    architecture = None

    def __init__(self, dtype=None, name=None, trainable=True, **config_fields):
        config_fields.pop("architecture", None)
        config = EncoderConfig(architecture=self.architecture, **config_fields)
        dtype = keras.dtype_policies.get(dtype) if dtype is not None else None

        # === Layers ===
        embeddings = self._make_embeddings(config, dtype)
        blocks = [
            TransformerEncoderBlock(
                num_heads=config.num_heads,
                intermediate_size=config.intermediate_size,
                activation=config.activation,
                dropout=config.dropout,
                attention_dropout=config.attention_dropout,
                layer_norm_epsilon=config.layer_norm_epsilon,
                norm_first=config.norm_first,
                kernel_initializer=bert_initializer(config.initializer_range),
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
            for index in range(self._num_distinct_blocks(config))
        ]
        final_layer_norm = None
        if config.norm_first:
            # Pre-LN blocks leave the residual stream unnormalized; normalize it once at the end.
            final_layer_norm = keras.layers.LayerNormalization(
                epsilon=config.layer_norm_epsilon, dtype=dtype, name="final_layer_norm"
            )
        pooler = Pooler(
            kernel_initializer=bert_initializer(config.initializer_range), dtype=dtype, name="pooler"
        )

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])
        encoder_outputs = []
        for depth in range(config.num_layers):
            x = blocks[self._block_index(config, depth)](
                x, padding_mask=inputs["padding_mask"], use_causal_mask=config.causal
            )
            encoder_outputs.append(x)
        if final_layer_norm is not None:
            x = final_layer_norm(x)
            encoder_outputs[-1] = x
        outputs = {
            "sequence_output": x,
            "pooled_output": pooler(x),
            "encoder_outputs": encoder_outputs,
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, trainable=trainable)

        # A functional model does not keep the policy it was given; the layers do. Heads
        # built on this encoder, and get_config, use this one.
        self.layer_dtype_policy = embeddings.dtype_policy
        self.config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.final_layer_norm = final_layer_norm
        self.pooler = pooler

    # --- What subclasses decide ---
    def _factorizes_embedding(self, config):
        """Whether tokens are embedded at width E and projected to H."""
        raise NotImplementedError

    def _make_embeddings(self, config, dtype):
        common = dict(
            vocabulary_size=config.vocabulary_size,
            max_sequence_length=config.max_sequence_length,
            type_vocab_size=config.type_vocab_size,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="embeddings",
        )
        if self._factorizes_embedding(config):
            return FactorizedEmbedding(
                embedding_size=config.embedding_size, hidden_size=config.hidden_size, **common
            )
        return BertEmbeddings(embedding_size=config.hidden_size, **common)

    def _num_distinct_blocks(self, config):
        return config.num_layers

    def _block_index(self, config, depth):
        return depth

    # --- Shared API ---
    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            # Extra keys (a task's labels or masked positions) would make Keras match the
            # dict to the inputs by position, silently feeding one input as another.
            inputs = {name: inputs[name] for name in INPUT_NAMES if name in inputs}
            # The functional model would silently cast float ids to int32 (truncating them).
            for name, value in inputs.items():
                if hasattr(value, "dtype"):
                    check_integer_ids(value, name)
                    check_rank(value, 2, name, "[batch, seq]")
            inputs = check_same_shape(inputs)
        return super().call(inputs, training=training, mask=mask)

    @property
    def token_embedding(self):
        """The `[V, E]` `keras.layers.ReversibleEmbedding` a masked-LM head ties to."""
        return self.embeddings.token_embedding

    @classmethod
    def from_preset(cls, name, **overrides):
        """An encoder with the architecture of preset `name` (randomly initialized)."""
        config = get_preset(name)
        if config.architecture != cls.architecture:
            raise ValueError(
                f"Preset {name!r} is a {config.architecture} architecture; use "
                f"bertlayers.networks.build_encoder({name!r}) or the matching encoder class."
            )
        return cls.from_encoder_config(config.replace(**overrides))

    @classmethod
    def from_encoder_config(cls, config, **kwargs):
        return cls(**config.to_dict(), **kwargs)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.layer_dtype_policy),
        }
        config.update(self.config.to_dict())
        config.pop("architecture")
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def reinitialized(encoder, seed=None):
    """An encoder of the same architecture with fresh random weights (the no-pretraining baseline)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return type(encoder).from_config(encoder.get_config())
