"""XLNet's block: relative attention and a feed-forward network, post-LayerNorm, applied to
the content stream and (in pretraining) the query stream with the same weights."""

import keras

from bertlayers.families.xlnet.relative_attention import RelativeAttention
from bertlayers.layers.activations import activate, canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.token_rows import on_token_rows


@keras.saving.register_keras_serializable(package="bertlayers")
class RelativeEncoderBlock(keras.layers.Layer):
    """One XLNet layer, for each stream x (content h, query g):

        a = LN(x + Dropout(RelativeAttention(x)))
        y = LN(a + Dropout(W2 · Dropout(act(W1 · a))))

    Args:
      num_heads, intermediate_size, activation, dropout, attention_dropout,
      layer_norm_epsilon, kernel_initializer: as in `TransformerEncoderBlock`.

    Call args: those of `RelativeAttention` (`content`, `position_encoding`, the masks, the
    segment matrix, `memory`, `query`, `target_mapping`, `return_attention_scores`).

    Returns:
      As `RelativeAttention`: content `[B, S, H]`, or `(content, query [B, T, H])`, then
      the attention probabilities if asked.
    """

    def __init__(
        self,
        num_heads,
        intermediate_size,
        activation="gelu",
        dropout=0.1,
        attention_dropout=0.1,
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.intermediate_size = int(intermediate_size)
        self.activation = canonical_activation(activation)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self._activation_fn = get_activation(self.activation)

    def build(self, content_shape, *args, **kwargs):
        hidden = content_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not divisible by num_heads {self.num_heads}.")
        policy = self.dtype_policy
        self.attention = RelativeAttention(
            self.num_heads,
            hidden // self.num_heads,
            attention_dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=policy,
            name="attention",
        )
        self.attention.build(content_shape)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_layer_norm"
        )
        self.attention_layer_norm.build(content_shape)
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_size,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=policy,
            name="intermediate",
        )
        self.intermediate_dense.build(content_shape)
        self.output_dense = keras.layers.Dense(
            hidden, kernel_initializer=clone_initializer(self.kernel_initializer), dtype=policy, name="output"
        )
        self.output_dense.build(tuple(content_shape[:-1]) + (self.intermediate_size,))
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="output_layer_norm"
        )
        self.output_layer_norm.build(content_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=policy)
        self.built = True

    def _finish(self, stream, attended, training):
        """Residual + LayerNorm around the attention, then the feed-forward network."""
        x = self.attention_layer_norm(stream + self.dropout_layer(attended, training=training))

        def feed_forward(rows):
            activated = activate(self._activation_fn, self.intermediate_dense(rows), training)
            inner = self.dropout_layer(activated, training=training)
            return self.output_dense(inner)

        return self.output_layer_norm(x + self.dropout_layer(on_token_rows(feed_forward, x), training=training))

    def call(
        self, content, position_encoding, query=None, return_attention_scores=False, training=None, **attention_args
    ):
        results = self.attention(
            content,
            position_encoding,
            query=query,
            return_attention_scores=return_attention_scores,
            training=training,
            **attention_args,
        )
        if not isinstance(results, tuple):
            return self._finish(content, results, training)  # [B, S, H]
        streams = (content,) if query is None else (content, query)
        outputs = tuple(self._finish(x, attended, training) for x, attended in zip(streams, results))
        return outputs + results[len(streams) :]

    def compute_output_spec(self, content, position_encoding, query=None, return_attention_scores=False, **kwargs):
        # Each stream keeps its shape and dtype (a residual sum): said here, a functional model's
        # construction skips tracing `call` (TransformerEncoderBlock.compute_output_spec says why).
        if return_attention_scores:
            return super().compute_output_spec(
                content, position_encoding, query=query, return_attention_scores=True, **kwargs
            )
        streams = tuple(keras.KerasTensor(x.shape, dtype=x.dtype) for x in (content, query) if x is not None)
        return streams[0] if query is None else streams

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
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
