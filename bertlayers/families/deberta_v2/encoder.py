"""The DeBERTa encoder network (He et al. 2021, DeBERTa; 2023, DeBERTa-v3), in the form of
transformers' `deberta-v2` model_type, which holds v2 and v3.

Dimensions: B batch, S sequence, H hidden, R = 2 * span relative-position rows, L layers.

    x0 = LN(TokenEmb(ids) [+ SegmentEmb] [+ PositionEmb]) · padding   [B, S, H]
    P  = LN(RelativeTable)                                            [R, H], every layer reads it
    x1 = Block(x0, P)             post-norm BERT block, disentangled attention over P
    x1 = LN(x1 + tanh(Conv1d(x0))) · padding          (v2 only: `conv_kernel_size` > 0)
    x_l = Block(x_{l-1}, P)       l = 2..L

No absolute position enters v3's input (`learned_positions=False`): positions are the relative
distances, log-bucketed beyond `position_buckets / 2`, that the attention scores against P.
"""

import keras
from keras import ops

from bertlayers.families.deberta_v2.disentangled_attention import POSITION_TERMS, DisentangledAttention
from bertlayers.families.deberta_v2.relative_position_table import RelativePositionTable
from bertlayers.families.deberta_v2.residual_convolution import ResidualConvolution
from bertlayers.layers.initializers import bert_initializer
from bertlayers.networks.block_parts import build_block, register_attention
from bertlayers.networks.block_stack import BlockStack, StackOutputs
from bertlayers.networks.encoder_base import EncoderBase


def _disentangled(settings, num_heads, key_dim, dropout, kernel_initializer, dtype):
    raise ValueError(
        "EncoderConfig.attention 'disentangled' reads a relative-position table the DeBERTa encoder owns: build it "
        "with architecture 'deberta_v2' (DebertaV2Encoder)."
    )


register_attention("disentangled", _disentangled)


@keras.saving.register_keras_serializable(package="bertlayers")
class DebertaV2Encoder(EncoderBase):
    """DeBERTa-v2/v3: BERT's post-norm blocks with disentangled attention (content->content,
    content->position, position->content) over one relative-position table all layers share.

    Keyword arguments are the fields of `EncoderConfig` (its `attention` is "disentangled";
    `learned_positions` is v2's `position_biased_input`) and:

    Args:
      max_relative_positions: the farthest distance told apart (-1: `max_sequence_length`).
      position_buckets: log-bucketed distances, a table of `2 * position_buckets` rows (256 in
        v3); 0: none, `2 * max_relative_positions` rows, distances clipped.
      share_att_key: the position terms reuse the content query/key projections (v3).
      position_terms: which of "c2p" and "p2c" are scored (the checkpoints' `pos_att_type`).
      normalize_relative_embeddings: a LayerNorm over the table (`norm_rel_ebd: "layer_norm"`).
      conv_kernel_size: v2's convolution after the first layer (0: none, v3).
      conv_groups, conv_activation: its groups and activation.

    Outputs: as `EncoderBase`'s; the pooler is DeBERTa's context pooler, act(W · x[CLS]).
    """

    architecture = "deberta_v2"

    def __init__(
        self,
        max_relative_positions: int = -1,
        position_buckets: int = 256,
        share_att_key: bool = True,
        position_terms: tuple | list = ("p2c", "c2p"),
        normalize_relative_embeddings: bool = True,
        conv_kernel_size: int = 0,
        conv_groups: int = 1,
        conv_activation: str = "tanh",
        **kwargs,
    ) -> None:
        self.max_relative_positions = int(max_relative_positions)
        self.position_buckets = max(int(position_buckets), 0)
        self.share_att_key = bool(share_att_key)
        self.position_terms = tuple(position_terms)
        self.normalize_relative_embeddings = bool(normalize_relative_embeddings)
        self.conv_kernel_size = int(conv_kernel_size)
        self.conv_groups = int(conv_groups)
        self.conv_activation = str(conv_activation)
        unknown = sorted(set(self.position_terms) - set(POSITION_TERMS))
        if unknown:
            raise ValueError(f"DebertaV2Encoder: position_terms takes {' and '.join(POSITION_TERMS)}, got {unknown}.")
        if self.conv_kernel_size < 0:
            raise ValueError(f"DebertaV2Encoder: conv_kernel_size must be >= 0, got {conv_kernel_size}.")
        kwargs.setdefault("attention", "disentangled")
        kwargs.setdefault("learned_positions", False)
        kwargs.setdefault("type_vocab_size", 0)
        kwargs.setdefault("pooler_activation", "gelu")
        super().__init__(**kwargs)

    def relative_span(self, config):
        """(largest distance, half the table's rows): `max_relative_positions` (or the sequence
        limit) and `position_buckets` (or that distance)."""
        distance = self.max_relative_positions if self.max_relative_positions >= 1 else config.max_sequence_length
        return distance, self.position_buckets if self.position_buckets > 0 else distance

    def _config_of(self, fields, embedding_layer):
        config = super()._config_of(fields, embedding_layer)
        if config.attention != "disentangled" or config.layer_types is not None:
            raise ValueError(
                f"DebertaV2Encoder: every layer's attention is disentangled; EncoderConfig.attention is "
                f"{config.attention!r}{' and layer_types is set' if config.layer_types else ''}."
            )
        if config.embedding_size not in (None, config.hidden_size) or config.norm_first:
            raise ValueError(
                "DebertaV2Encoder: an embedding width other than hidden_size (DeBERTa's embed_proj) and pre-norm "
                "blocks are not supported."
            )
        return config

    def make_block(self, config, index, dtype):
        depth = self.block_of_layer(config).index(index)
        settings = config.layer_settings(depth)
        distance, _ = self.relative_span(config)
        attention = DisentangledAttention(
            config.num_heads,
            config.head_size,
            max_relative_positions=distance,
            position_buckets=self.position_buckets,
            share_att_key=self.share_att_key,
            position_terms=self.position_terms,
            dropout=config.attention_dropout,
            use_bias=settings.use_bias,
            kernel_initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="self_attention",
        )
        return build_block(
            config,
            settings,
            dtype,
            f"transformer_layer_{index}",
            block_class=self._block_class,
            block_config={"attention_layer": attention, **self._block_config},
        )

    def make_stack(self, config, blocks, block_of_layer, dtype):
        _, span = self.relative_span(config)
        table = RelativePositionTable(
            2 * span,
            config.hidden_size,
            normalize=self.normalize_relative_embeddings,
            layer_norm_epsilon=config.layer_norm_epsilon,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            dtype=dtype,
            name="relative_embeddings",
        )
        convolution = None
        if self.conv_kernel_size:
            convolution = ResidualConvolution(
                self.conv_kernel_size,
                groups=self.conv_groups,
                activation=self.conv_activation,
                dropout=config.dropout,
                layer_norm_epsilon=config.layer_norm_epsilon,
                kernel_initializer=bert_initializer(config.initializer_range),
                dtype=dtype,
                name="convolution",
            )
        return DisentangledStack(blocks, block_of_layer, table, convolution)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_relative_positions": self.max_relative_positions,
                "position_buckets": self.position_buckets,
                "share_att_key": self.share_att_key,
                "position_terms": list(self.position_terms),
                "normalize_relative_embeddings": self.normalize_relative_embeddings,
                "conv_kernel_size": self.conv_kernel_size,
                "conv_groups": self.conv_groups,
                "conv_activation": self.conv_activation,
            }
        )
        return config


class DisentangledStack(BlockStack):
    """DeBERTa's stack: the relative-position table every block reads, the padding's embeddings
    zeroed (the convolution reads them), and v2's convolution after the first layer."""

    def __init__(self, blocks, block_of_layer, table, convolution=None):
        super().__init__(blocks, block_of_layer)
        self.table = table
        self.convolution = convolution

    def layers(self):
        layers = {"relative_embeddings": self.table}
        if self.convolution is not None:
            layers["convolution"] = self.convolution
        return layers

    @property
    def computes_rows(self):
        return False

    def __call__(self, x, inputs, return_attention_scores=False):
        padding_mask = inputs["padding_mask"]
        x = x * ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), x.dtype), -1)  # [B, S, H]
        embedded = x
        table = self.table(x)  # [1, R, H]
        encoder_outputs, attention_scores = [], []
        for depth, index in enumerate(self.block_of_layer):
            x = self.blocks[index](
                x,
                padding_mask=padding_mask,
                return_attention_scores=return_attention_scores,
                attention_inputs={"relative_embeddings": table},
            )
            if return_attention_scores:
                x, scores = x
                attention_scores.append(scores)  # [B, N, S, S]
            if depth == 0 and self.convolution is not None:
                x = self.convolution(embedded, x, padding_mask)  # [B, S, H]
            encoder_outputs.append(x)  # [B, S, H]
        return StackOutputs(x, encoder_outputs, attention_scores, {})
