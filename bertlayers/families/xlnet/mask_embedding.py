"""XLNet's query-stream start: one learned vector, the same at every predicted position,
so the query stream knows where it predicts but not what stands there."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.input_checks import check_rank


@keras.saving.register_keras_serializable(package="bertlayers")
class MaskEmbedding(keras.layers.Layer):
    """g0[b, t] = w for every prediction t.

    Args:
      hidden_size: H.
      initializer: initializer of w `[H]`.

    Call args:
      target_mapping: `[B, T, S]` (only its first two dimensions are read).

    Returns:
      `[B, T, H]`.
    """

    def __init__(self, hidden_size, initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = int(hidden_size)
        self.initializer = keras.initializers.get(initializer or bert_initializer())

    def build(self, target_mapping_shape=None):
        self.embedding = self.add_weight(name="embedding", shape=(self.hidden_size,), initializer=self.initializer)
        self.built = True

    def call(self, target_mapping):
        check_rank(target_mapping, 3, "target_mapping", "[batch, predictions, seq]")
        shape = ops.shape(target_mapping)
        return ops.broadcast_to(ops.cast(self.embedding, self.compute_dtype), (shape[0], shape[1], self.hidden_size))

    def compute_output_shape(self, target_mapping_shape):
        return (target_mapping_shape[0], target_mapping_shape[1], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size, "initializer": keras.initializers.serialize(self.initializer)})
        return config
