"""Hidden states onto the vocabulary through the token embedding's transpose, plus a bias."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class TiedOutputProjection(keras.layers.Layer):
    """logits = x · TokenEmbᵀ + b (XLNet's `lm_loss`: no transform before it).

    Args:
      token_embedding: the encoder's `keras.layers.ReversibleEmbedding` `[V, H]`.

    Call args:
      inputs: `[..., H]`.

    Returns:
      float32 logits `[..., V]`.
    """

    def __init__(self, token_embedding, **kwargs):
        super().__init__(**kwargs)
        if isinstance(token_embedding, dict):
            token_embedding = keras.layers.deserialize(token_embedding)
        self.token_embedding = token_embedding

    def build(self, inputs_shape=None):
        if not self.token_embedding.built:
            self.token_embedding.build()
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
        )
        self.built = True

    def call(self, inputs):
        logits = self.token_embedding(inputs, reverse=True)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(tuple(inputs.shape[:-1]) + (self.token_embedding.input_dim,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config["token_embedding"] = keras.layers.serialize(self.token_embedding)
        return config
