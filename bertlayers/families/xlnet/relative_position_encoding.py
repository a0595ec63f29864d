"""Sinusoidal encodings of relative distances (Transformer-XL, XLNet).

A sequence of S positions after M memory positions has keys at distances
K = M + S, K - 1, ..., -S + 1 from its queries (R = K + S distances; a bidirectional
model needs the negative ones). Each distance d is encoded as
[sin(d · f_0), ..., sin(d · f_{H/2-1}), cos(d · f_0), ..., cos(d · f_{H/2-1})]
with f_k = 10000^(-2k / H). No weights: the attention projects these itself.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class RelativePositionEncoding(keras.layers.Layer):
    """Relative distance encodings for a sequence and its memory.

    Args:
      hidden_size: H (even).
      clamp_len: distances beyond +-clamp_len share the encoding of +-clamp_len; -1 for none.
      bidirectional_data: the second half of every batch holds the first half's sequences
        reversed (XLNet's `bi_data`): those rows get the distances negated.

    Call args:
      sequence: `[B, S, ...]` (only its shape is read).
      memory: `[B, M, ...]` or None.

    Returns:
      `[1, R, H]`, or `[B, R, H]` with `bidirectional_data`.
    """

    def __init__(self, hidden_size, clamp_len=-1, bidirectional_data=False, **kwargs):
        super().__init__(**kwargs)
        if int(hidden_size) % 2:
            raise ValueError(f"RelativePositionEncoding needs an even hidden_size, got {hidden_size}.")
        self.hidden_size = int(hidden_size)
        self.clamp_len = int(clamp_len)
        self.bidirectional_data = bool(bidirectional_data)
        self.built = True

    def _encode(self, distances):
        frequencies = 1.0 / ops.power(10000.0, ops.arange(0, self.hidden_size, 2, dtype="float32") / self.hidden_size)
        if self.clamp_len > 0:
            distances = ops.clip(distances, -self.clamp_len, self.clamp_len)
        angles = distances[:, None] * frequencies[None, :]  # [R, H/2]
        return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)  # [R, H]

    def call(self, sequence, memory=None):
        length = ops.shape(sequence)[1]
        key_length = length if memory is None else ops.shape(memory)[1] + length
        distances = ops.cast(ops.arange(key_length, -length, -1), "float32")  # [R]: K, ..., -S+1
        forward = self._encode(distances)[None]  # [1, R, H]
        if not self.bidirectional_data:
            return ops.cast(forward, self.compute_dtype)
        half = ops.shape(sequence)[0] // 2
        backward = self._encode(-distances)[None]
        encoding = ops.concatenate(
            [ops.repeat(forward, half, axis=0), ops.repeat(backward, half, axis=0)], axis=0
        )  # [B, R, H]
        return ops.cast(encoding, self.compute_dtype)

    def compute_output_shape(self, sequence_shape, memory_shape=None):
        return (None if self.bidirectional_data else 1, None, self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "clamp_len": self.clamp_len,
                "bidirectional_data": self.bidirectional_data,
            }
        )
        return config
