"""Multi-head attention with rotary position embedding (Su et al. 2021, RoFormer), as ModernBERT,
NomicBERT, EuroBERT and GTE use it.

Each query and key is rotated by its position before the dot product: pair k of a head's D
dimensions (dimension k and k + D/2, the half-split layout transformers uses) turns by the angle
p · θ^(-2k/D) at position p, so the score of query i and key j depends on i - j alone.

    q' = q · cos(p·f) + rotate_half(q) · sin(p·f),   rotate_half([a, b]) = [-b, a]
    f_k = θ^(-2k/D), k = 0..D/2-1,  cos and sin of [f, f] (each frequency on both halves)
"""

import keras
from keras import ops

from bertlayers.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="bertlayers")
class RotaryAttention(MultiHeadAttention):
    """`MultiHeadAttention` whose queries and keys are rotated by their positions.

    Args (besides `MultiHeadAttention`'s):
      rotary_theta: the base θ of the rotation frequencies (10,000 in RoFormer; ModernBERT uses
        160,000 on its global layers and 10,000 on its local ones).

    Call args: as `MultiHeadAttention`'s; `query_positions` (int `[batch, Q]`) says where the
    queries sit (default 0..Q-1), so rows computed alone (`TransformerEncoderBlock(output_positions=)`)
    equal the full computation's. The keys sit at 0..K-1, or at `key_positions` (packed rows).

    Returns:
      `[batch, Q, hidden]` (and the probabilities `[batch, N, Q, K]`, if asked for).
    """

    def __init__(self, num_heads: int, key_dim: int, rotary_theta: float = 10000.0, **kwargs) -> None:
        super().__init__(num_heads, key_dim, **kwargs)
        if self.key_dim % 2:
            raise ValueError(f"Rotary attention turns pairs of dimensions: key_dim must be even, got {key_dim}.")
        self.rotary_theta = float(rotary_theta)
        if not self.rotary_theta > 1.0:
            raise ValueError(f"rotary_theta must be > 1, got {rotary_theta!r}.")

    def positioned(self, query, key, query_positions, key_positions=None):
        batch, queries, keys = ops.shape(query)[0], ops.shape(query)[1], ops.shape(key)[1]
        if query_positions is None:
            query_positions = ops.broadcast_to(ops.expand_dims(ops.arange(queries), 0), (batch, queries))
        if key_positions is None:
            key_positions = ops.broadcast_to(ops.expand_dims(ops.arange(keys), 0), (batch, keys))
        return self._rotated(query, query_positions), self._rotated(key, key_positions)

    def _rotated(self, x, positions):
        # x [B, T, N, D], positions [B, T]; the angles in float32 (positions up to 8k times 1).
        frequencies = ops.power(
            self.rotary_theta, -ops.arange(0, self.key_dim, 2, dtype="float32") / self.key_dim
        )  # [D/2]
        angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * frequencies  # [B, T, D/2]
        # expand_dims and split, not `[:, :, None]` and `[..., :half]`: TFLite's converter has no
        # builtin for a strided slice that adds an axis to a tensor of unknown batch and length.
        cos = ops.expand_dims(ops.cast(ops.cos(angles), x.dtype), 2)  # [B, T, 1, D/2]
        sin = ops.expand_dims(ops.cast(ops.sin(angles), x.dtype), 2)
        first, second = ops.split(x, 2, axis=-1)
        return ops.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)

    def get_config(self):
        return {**super().get_config(), "rotary_theta": self.rotary_theta}
