"""How an encoder's weights split across the devices of a `model` mesh axis (model parallelism):
variable-path patterns and, for each dimension of a matching variable, `MODEL_AXIS` or None.

The core rules cover the blocks every family builds from (`MultiHeadAttention`, the plain and
gated feed-forward networks); a family whose layers name their weights otherwise registers its own
(`register_model_parallel_rule`, as XLNet's relative attention does). `bertlayers.training.sharding`
turns them into Keras's `LayoutMap`.
"""

import re

MODEL_AXIS = "model"

# Keras matches a variable's whole path against each pattern (`re.fullmatch`) and refuses a path
# that two of them match, so each pattern names its layer and weight. Attention kernels are
# [hidden, heads, head_dim] (the output projection [heads, head_dim, hidden]): the heads are split,
# so each device attends with its own heads and one reduction joins them after the output
# projection; the feed-forward kernels split along their inner width, joined after the output
# kernel (Megatron-LM's layout).
_RULES = {
    r".*self_attention/(query|key|value)/kernel": (None, MODEL_AXIS, None),
    r".*self_attention/(query|key|value)/bias": (MODEL_AXIS, None),
    r".*self_attention/attention_output/kernel": (MODEL_AXIS, None, None),
    r".*(intermediate|feed_forward/gate|feed_forward/up)/kernel": (None, MODEL_AXIS),
    r".*(intermediate|feed_forward/gate|feed_forward/up)/bias": (MODEL_AXIS,),
    r"(.*/)?output/kernel": (MODEL_AXIS, None),  # the feed-forward output, [inner, hidden]
}


def register_model_parallel_rule(pattern: str, axes: tuple) -> None:
    """Split the variables whose whole path matches `pattern` (a regular expression) along
    `axes`: one entry per dimension, `MODEL_AXIS` or None (replicated). For a family's own layers."""
    re.compile(pattern)
    if any(axis not in (None, MODEL_AXIS) for axis in axes):
        raise ValueError(f"Model-parallel axes are {MODEL_AXIS!r} or None, got {axes!r} for {pattern!r}.")
    _RULES[pattern] = tuple(axes)


def model_parallel_rules() -> dict:
    """The registered rules, {pattern: axes}: the core's and the families'."""
    return dict(_RULES)


def model_parallel_axes(path: str) -> tuple | None:
    """The axes of the first rule matching the variable path `path`, or None (replicated)."""
    for pattern, axes in _RULES.items():
        if re.fullmatch(pattern, path):
            return axes
    return None
