"""The mean of per-token (or per-prediction) values over the real ones: how the pretrainers' and
the distiller's losses and metrics average."""

from keras import ops

from bertlayers.backend import TensorLike


def weighted_mean(values: TensorLike, weights: TensorLike) -> TensorLike:
    """Σ w·v / Σ w in float32 (0 where every weight is 0): `values` and `weights` of one shape,
    weights 1 at real tokens and 0 at padding (or any non-negative weights)."""
    weights = ops.cast(weights, "float32")
    return ops.sum(ops.cast(values, "float32") * weights) / ops.maximum(ops.sum(weights), 1e-6)
