"""The Transformer encoder block: self-attention and a feed-forward network, each with a
residual connection and LayerNorm."""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.activations import activate, canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.masking import (
    causal_attention_mask,
    check_attention_window,
    local_attention_mask,
    merge_attention_masks,
)
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.registered import registered_class, registered_name
from bertlayers.layers.token_rows import on_token_rows


@keras.saving.register_keras_serializable(package="bertlayers")
class TransformerEncoderBlock(keras.layers.Layer):
    """One BERT layer.

    Post-LayerNorm (BERT, `norm_first=False`):
        h = LN(x + Dropout(Attention(x)))
        y = LN(h + Dropout(W2 · act(W1 · h)))
    Pre-LayerNorm (`norm_first=True`):
        h = x + Dropout(Attention(LN(x)))
        y = h + Dropout(W2 · act(W1 · LN(h)))

    Args:
      num_heads: attention heads; the hidden width must be divisible by it.
      intermediate_size: width of the feed-forward network's inner layer.
      activation: "gelu" (exact, erf), "gelu_approximate" (tanh), "relu", ...
      dropout: dropout on the attention and feed-forward outputs.
      attention_dropout: dropout on the attention probabilities.
      layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).
      norm_first: pre-LayerNorm instead of BERT's post-LayerNorm.
      kernel_initializer: initializer of every kernel.
      attention_layer: an attention layer to use instead of `MultiHeadAttention` (for example
        rotary or relative attention); it is called as `attention_layer(query, value,
        attention_mask=..., return_attention_scores=..., training=...)`, plus what its class
        declares in `position_arguments` (`MultiHeadAttention`'s: `query_positions`, int
        `[batch, Q]` saying where the queries sit, the keys always spanning the sequence;
        `key_positions` for packed rows; `attention_window`, computed band by band). A layer that
        declares none is taken to ignore positions (content attention): it gets none, the block
        never computes chosen rows alone (`computes_rows`), and a window is a dense mask.
      feed_forward_layer: a position-wise layer `[tokens, H] -> [tokens, H]` to use instead of
        the two dense layers (for example `GatedFeedForward`, GeGLU); the block keeps the
        dropout, residual and LayerNorm around it, and runs it on real tokens' rows only.
      attention_window: attend only to keys within `attention_window // 2` positions of the
        query (local, sliding-window attention, ModernBERT's `local_attention`); None: all.
      normalization: the class of both normalization layers (or its registered name), built as
        `normalization(epsilon=layer_norm_epsilon, dtype=, name=)`; default
        `keras.layers.LayerNormalization` (`keras.layers.RMSNormalization` for RMSNorm).
      use_bias: biases on the two dense layers of the default feed-forward network (the
        default attention layer takes its own `use_bias`).
      normalize_attention_input: with `norm_first`, whether attention reads LN(x); False reads x
        as it is (the first layer of an encoder whose embeddings end in a norm already:
        ModernBERT's layer 0 has no `attn_norm`). No norm layer is built then.
      post_sublayer_norm: with `norm_first`, also normalize the attention's output and the
        feed-forward network's before each residual sum (Gemma 2 and 3's sandwich norms:
        `attention_output_norm`, `feed_forward_output_norm`).

    Call args:
      inputs: `[batch, seq, hidden]`.
      padding_mask: `[batch, seq]`, nonzero at real tokens.
      attention_mask: `[batch, seq, seq]`, nonzero where query i may attend key j.
      use_causal_mask: also restrict each position to itself and earlier positions.
      return_attention_scores: also return the probabilities `[batch, heads, seq, seq]`.
      positions: int `[batch, seq]`, each token's position in its own sequence (packed rows,
        where positions restart in every sequence; `attention_mask` then keeps each sequence to
        itself); None: 0..seq-1.
      attention_inputs: further keyword inputs of the attention layer, the same at every call
        (DeBERTa's relative-position table: `{"relative_embeddings": [1, 2 * span, H]}`).
      output_positions: int `[batch, P]`: compute only the rows at these positions (the
        queries); keys and values still span the sequence, so the rows equal the full output's
        rows there. After the last layer a classifier reads only [CLS] and a masked LM only the
        masked positions: computing just those rows skips most of that layer's work.

    Returns:
      `[batch, seq, hidden]`, or `[batch, P, hidden]` with `output_positions` (and the
      probabilities `[batch, heads, seq or P, seq]`, if asked for). Rows at padding are zeros:
      with a `padding_mask`, the position-wise half of the block (everything after attention)
      runs on the real tokens' rows only, which skips the padding's share of the feed-forward
      network, two thirds of the block's matmul work.
    """

    def __init__(
        self,
        num_heads: int,
        intermediate_size: int,
        activation: str = "gelu",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_epsilon: float = 1e-12,
        norm_first: bool = False,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        attention_layer: keras.layers.Layer | dict | None = None,
        feed_forward_layer: keras.layers.Layer | dict | None = None,
        attention_window: int | None = None,
        normalization: str | type | None = None,
        use_bias: bool = True,
        normalize_attention_input: bool = True,
        post_sublayer_norm: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.intermediate_size = int(intermediate_size)
        self.activation = canonical_activation(activation)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.norm_first = bool(norm_first)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        if isinstance(attention_layer, dict):
            attention_layer = keras.saving.deserialize_keras_object(attention_layer)
        if isinstance(feed_forward_layer, dict):
            feed_forward_layer = keras.saving.deserialize_keras_object(feed_forward_layer)
        # Serialized only when the user plugged one in; the default is rebuilt from the config.
        self._attention_was_given = attention_layer is not None
        self.attention_layer = attention_layer
        self.feed_forward_layer = feed_forward_layer
        self._activation_fn = get_activation(self.activation)
        self.attention_window = check_attention_window(attention_window)
        self._normalization = registered_class(normalization, "normalization") if normalization is not None else None
        self.use_bias = bool(use_bias)
        self.normalize_attention_input = bool(normalize_attention_input)
        self.post_sublayer_norm = bool(post_sublayer_norm)
        if self.post_sublayer_norm and not self.norm_first:
            raise ValueError(
                "post_sublayer_norm=True normalizes each sublayer's output before the residual sum, around the "
                "pre-norms of a pre-norm block (norm_first=True); a post-norm block normalizes after the sum."
            )
        if not (self.normalize_attention_input or self.norm_first):
            raise ValueError(
                "normalize_attention_input=False leaves out the norm before attention, which only a pre-norm block "
                "(norm_first=True) has; a post-norm block normalizes after the residual."
            )
        self.supports_masking = False

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def _layer_norm(self, name):
        normalization = self._normalization or keras.layers.LayerNormalization
        return normalization(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)

    def build(self, inputs_shape, padding_mask_shape=None, attention_mask_shape=None):
        hidden_size = inputs_shape[-1]
        if self.attention_layer is None:
            if hidden_size % self.num_heads:
                raise ValueError(f"hidden size {hidden_size} is not divisible by num_heads {self.num_heads}.")
            self.attention_layer = MultiHeadAttention(
                num_heads=self.num_heads,
                key_dim=hidden_size // self.num_heads,
                dropout=self.attention_dropout,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="self_attention",
            )
        if not self.attention_layer.built:  # a plugged-in layer may arrive built (deserialized)
            self.attention_layer.build(inputs_shape, inputs_shape)
        self.attention_dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.attention_layer_norm = None
        if self.normalize_attention_input:
            self.attention_layer_norm = self._layer_norm("attention_layer_norm")
            self.attention_layer_norm.build(inputs_shape)

        if self.feed_forward_layer is None:
            self.intermediate_dense = self._dense(self.intermediate_size, "intermediate")
            self.intermediate_dense.build(inputs_shape)
            self.output_dense = self._dense(hidden_size, "output")
            self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_size,))
        elif not self.feed_forward_layer.built:
            self.feed_forward_layer.build((None, hidden_size))  # it runs on token rows
        self.output_dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_layer_norm = self._layer_norm("output_layer_norm")
        self.output_layer_norm.build(inputs_shape)
        self.attention_output_norm = self.feed_forward_output_norm = None
        if self.post_sublayer_norm:
            self.attention_output_norm = self._layer_norm("attention_output_norm")
            self.attention_output_norm.build(inputs_shape)
            self.feed_forward_output_norm = self._layer_norm("feed_forward_output_norm")
            self.feed_forward_output_norm.build(inputs_shape)
        self.built = True

    @property
    def computes_rows(self):
        """Whether `output_positions` may be used: the attention layer is told where its queries
        sit (or is the default one), so rows computed alone equal the full output's rows."""
        return "query_positions" in self._position_arguments()

    @property
    def takes_window(self):
        """Whether the attention layer computes a sliding window itself (`attention_window`)."""
        return "attention_window" in self._position_arguments()

    def _position_arguments(self):
        """What the attention layer takes besides query, value and mask (its `position_arguments`)."""
        if self.attention_layer is None:
            return MultiHeadAttention.position_arguments
        return getattr(self.attention_layer, "position_arguments", frozenset())

    def _feed_forward(self, rows, training):
        if self.feed_forward_layer is not None:
            x = self.feed_forward_layer(rows)
        else:
            x = self.output_dense(activate(self._activation_fn, self.intermediate_dense(rows), training))
        if self.feed_forward_output_norm is not None:
            x = self.feed_forward_output_norm(x)
        return self.output_dropout_layer(x, training=training)

    def _after_attention(self, rows, training):
        # rows: [tokens, H] of residual + attention output. Everything from here on is
        # position-wise, so it runs on token rows (of real tokens only, where padding is known).
        if self.norm_first:
            return rows + self._feed_forward(self.output_layer_norm(rows), training)
        rows = self.attention_layer_norm(rows)
        return self.output_layer_norm(rows + self._feed_forward(rows, training))

    def _mask(self, inputs, padding_mask, attention_mask, use_causal_mask, output_positions, banded):
        """The attention mask of the queries' rows, `[B, 1 or S or P, S]` (or None): padding, the
        given mask, causal, and the window where it is not computed band by band."""
        for allowed in (
            causal_attention_mask(inputs) if use_causal_mask else None,
            local_attention_mask(inputs, self.attention_window)
            if self.attention_window and not banded and output_positions is None
            else None,
        ):
            if allowed is not None:  # [B, S, S]
                attention_mask = (
                    allowed if attention_mask is None else ops.logical_and(ops.cast(attention_mask, "bool"), allowed)
                )
        mask = merge_attention_masks(padding_mask, attention_mask)  # [B, 1 or S, S]
        if mask is not None and mask.shape[1] != 1:
            mask = _rows_at(mask, output_positions)  # [B, S or P, S]
        if self.attention_window and output_positions is not None:  # the band's rows alone, not [S, S]
            keys = ops.reshape(ops.arange(ops.shape(inputs)[1]), (1, 1, -1))
            near = ops.abs(ops.expand_dims(output_positions, -1) - keys) <= self.attention_window // 2  # [B, P, S]
            mask = near if mask is None else ops.logical_and(mask, near)
        return mask

    def _where(self, output_positions, positions, banded):
        """The attention layer's position arguments: where its queries sit (rows computed alone),
        where every token sits in its own sequence (packed rows), the window it computes by bands."""
        if output_positions is not None and not self.computes_rows:
            raise ValueError(
                f"{type(self.attention_layer).__name__} takes no query_positions, so the rows at output_positions "
                f"cannot be computed alone; compute the full output and gather them."
            )
        where = {"query_positions": output_positions} if self.computes_rows else {}
        if positions is not None:  # packed rows: each token's place in its own sequence
            if "key_positions" not in self._position_arguments():
                raise ValueError(
                    f"{type(self.attention_layer).__name__} takes no key_positions, so it cannot read packed rows "
                    "(where positions restart in every sequence)."
                )
            where = {
                "query_positions": _rows_at(ops.expand_dims(positions, -1), output_positions)[..., 0],
                "key_positions": positions,
            }
        if banded:
            where["attention_window"] = self.attention_window
        return where

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        output_positions=None,
        training=None,
        positions=None,
        attention_inputs=None,
    ):
        # A window over full rows, without probabilities to return, is computed band by band by an
        # attention layer that takes it (linear in the length); else it is a dense mask.
        banded = (
            self.attention_window is not None
            and output_positions is None
            and not return_attention_scores
            and attention_mask is None
            and not use_causal_mask
            and self.takes_window
        )
        mask = self._mask(inputs, padding_mask, attention_mask, use_causal_mask, output_positions, banded)
        residual = _rows_at(inputs, output_positions)  # [B, S or P, H]
        where = self._where(output_positions, positions, banded)
        x = self.attention_layer_norm(inputs) if self.norm_first and self.attention_layer_norm else inputs
        query = _rows_at(x, output_positions)  # [B, S or P, H]
        attended = self.attention_layer(
            query,
            x,
            attention_mask=mask,
            return_attention_scores=return_attention_scores,
            training=training,
            **where,
            **(attention_inputs or {}),
        )
        if return_attention_scores:
            attended, scores = attended
        if self.attention_output_norm is not None:
            attended = self.attention_output_norm(attended)
        x = residual + self.attention_dropout_layer(attended, training=training)  # [B, S or P, H]
        if output_positions is None:
            outputs = on_token_rows(lambda rows: self._after_attention(rows, training), x, padding_mask)
        else:
            outputs = on_token_rows(lambda rows: self._after_attention(rows, training), x)
            if padding_mask is not None:  # zeros at padding, as the full output has
                # expand_dims, not [..., None]: a strided slice adding an axis is no TFLite builtin
                real = ops.cast(_rows_at(ops.expand_dims(padding_mask, -1), output_positions), "bool")  # nonzero: real
                outputs = outputs * ops.cast(real, outputs.dtype)

        if return_attention_scores:
            return outputs, scores
        return outputs

    def compute_output_spec(self, inputs, *args, return_attention_scores=False, output_positions=None, **kwargs):
        # The block keeps its input's width and dtype (a residual sum), at the rows asked for. Said
        # here, a functional model's construction skips Keras's default, which traces `call` into a
        # scratch graph op by op: 77 ms a block on the AVX-512 EPYC, most of building an encoder.
        if return_attention_scores:  # the probabilities' dtype is the attention layer's: traced
            return super().compute_output_spec(
                inputs, *args, return_attention_scores=True, output_positions=output_positions, **kwargs
            )
        rows = inputs.shape[1] if output_positions is None else output_positions.shape[1]
        return keras.KerasTensor((inputs.shape[0], rows, inputs.shape[-1]), dtype=inputs.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_size": self.intermediate_size,
                "activation": self.activation,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "norm_first": self.norm_first,
                "attention_window": self.attention_window,
                "normalization": registered_name(self._normalization) if self._normalization else None,
                "use_bias": self.use_bias,
                "normalize_attention_input": self.normalize_attention_input,
                "post_sublayer_norm": self.post_sublayer_norm,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "attention_layer": (
                    keras.saving.serialize_keras_object(self.attention_layer) if self._attention_was_given else None
                ),
                "feed_forward_layer": (
                    keras.saving.serialize_keras_object(self.feed_forward_layer)
                    if self.feed_forward_layer is not None
                    else None
                ),
            }
        )
        return config


def _rows_at(tensor, positions):
    """`tensor` `[batch, seq, width]` at `positions` `[batch, P]` (all of it when None)."""
    if positions is None:
        return tensor
    return backend.rows_at(tensor, positions)  # [B, P, width]
