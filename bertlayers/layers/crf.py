"""A linear-chain conditional random field over per-token scores (tagging: Dense → CRF).

Dimensions: B batch, S sequence, T tags.

    score(y) = start[y_1] + Σ_t emissions[t, y_t] + Σ_t transitions[y_{t-1}, y_t] + end[y_last]
    log p(y) = score(y) − log Σ_y' exp score(y')          (the forward algorithm)
    decode   = argmax_y score(y)                          (Viterbi)

Only real tokens count (`padding_mask`); padding may sit anywhere, and a row of one token is
its start and end at once.
"""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer, clone_initializer


# The scans carry one float tensor (the TensorFlow backend's scan stacks its outputs in the
# carry's structure and dtype): [B, T] scores and a last column flagging rows already started.
def _packed(scores, started):
    return ops.concatenate([ops.cast(scores, "float32"), ops.cast(started, "float32")[:, None]], axis=1)


def _unpacked(carry):
    return carry[:, :-1], ops.not_equal(carry[:, -1], 0)


# The scanned inputs are one float tensor too: the TensorFlow backend's scan fails on several
# inputs whose length is unknown when traced (a sequence axis of None: served models, length-cut
# batches). Per step: [B, T] scores and a last column, the token's realness (or its tag).
def _columns(*parts):  # [S, B, T] and [S, B] parts -> [S, B, T + ...]
    parts = [ops.cast(part, "float32") for part in parts]
    return ops.concatenate([part if len(part.shape) == 3 else part[..., None] for part in parts], axis=-1)


def _start(emissions):  # [S, B, T] -> zeros [B, T + 1]: no row started
    shape = ops.shape(emissions)
    return ops.zeros((shape[1], shape[2] + 1), "float32")


@keras.saving.register_keras_serializable(package="bertlayers")
class LinearChainCRF(keras.layers.Layer):
    """Transition scores between tags, their log-likelihood and their best path.

    Args:
      num_tags: `T`.
      initializer: initializer of the transition, start and end scores.

    Call args:
      emissions: float `[B, S, T]` per-token tag scores (a tagger's logits).
      padding_mask: int `[B, S]`, nonzero at real tokens; all real when omitted.
      tags: int `[B, S]` gold tags, for training: the call then returns their negative
        log-likelihood.

    Returns:
      int32 `[B, S]`: the Viterbi tags (0 at padding); with `tags`, float32 `[B]`: −log p(tags).
    """

    def __init__(
        self, num_tags: int, initializer: str | keras.initializers.Initializer | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.num_tags = int(num_tags)
        if self.num_tags < 1:
            raise ValueError(f"LinearChainCRF needs num_tags >= 1, got {num_tags!r}.")
        self.initializer = keras.initializers.get(initializer or bert_initializer())

    def build(self, emissions_shape=None, padding_mask_shape=None, tags_shape=None):
        tags = self.num_tags
        self.transitions = self.add_weight(
            name="transitions", shape=(tags, tags), initializer=clone_initializer(self.initializer)
        )
        self.start_transitions = self.add_weight(name="start_transitions", shape=(tags,), initializer="zeros")
        self.end_transitions = self.add_weight(name="end_transitions", shape=(tags,), initializer="zeros")
        self.built = True

    def _prepared(self, emissions, padding_mask):
        emissions = ops.cast(emissions, "float32")  # sums over a sequence: float32 whatever the policy
        if padding_mask is None:
            padding_mask = ops.ones(ops.shape(emissions)[:2], "int32")
        mask = ops.not_equal(padding_mask, 0)  # [B, S]
        # Time-major for the scans: [S, B, T] and [S, B].
        return ops.transpose(emissions, (1, 0, 2)), ops.transpose(mask, (1, 0))

    def log_partition(self, emissions, padding_mask=None):
        """log Σ_y exp score(y) over every tag path of each row's real tokens: float32 `[B]`."""
        emissions, mask = self._prepared(emissions, padding_mask)
        transitions = ops.cast(self.transitions, "float32")[None, :, :]  # [1, T, T]
        start = ops.cast(self.start_transitions, "float32")

        def step(carry, inputs):
            alpha, started = _unpacked(carry)  # [B, T], [B]: whether a real token came before
            emission, real = _unpacked(inputs)  # [B, T], [B]
            # A row's first real token starts the chain; later ones extend it.
            extended = ops.logsumexp(alpha[:, :, None] + transitions, axis=1) + emission  # [B, T]
            new = ops.where(started[:, None], extended, start[None, :] + emission)
            return _packed(ops.where(real[:, None], new, alpha), started | real), None

        alpha, _ = _unpacked(ops.scan(step, _start(emissions), _columns(emissions, mask))[0])
        final = alpha + ops.cast(self.end_transitions, "float32")[None, :]
        # A row without real tokens has one (empty) path: log 1.
        return ops.where(ops.any(mask, axis=0), ops.logsumexp(final, axis=1), 0.0)

    def path_score(self, emissions, tags, padding_mask=None):
        """score(tags) of each row, counting its real tokens only: float32 `[B]`."""
        emissions, mask = self._prepared(emissions, padding_mask)
        tags = ops.transpose(ops.cast(tags, "int32"), (1, 0))  # [S, B]
        transitions = ops.cast(self.transitions, "float32")
        start, end = ops.cast(self.start_transitions, "float32"), ops.cast(self.end_transitions, "float32")

        def step(carry, inputs):
            score, previous = carry[:, 0], ops.cast(carry[:, 1], "int32")  # [B], [B] (-1: no real token yet)
            emission, tag, real = inputs[:, :-2], ops.cast(inputs[:, -2], "int32"), ops.not_equal(inputs[:, -1], 0)
            emitted = ops.take_along_axis(emission, tag[:, None], axis=1)[:, 0]
            from_previous = ops.take_along_axis(
                ops.take(transitions, ops.maximum(previous, 0), axis=0), tag[:, None], axis=1
            )[:, 0]
            moved = ops.where(previous >= 0, from_previous, ops.take(start, tag))
            score = ops.where(real, score + emitted + moved, score)
            return ops.stack([score, ops.cast(ops.where(real, tag, previous), "float32")], axis=1), None

        batch = ops.shape(emissions)[1]
        initial = ops.stack([ops.zeros((batch,), "float32"), ops.full((batch,), -1.0, "float32")], axis=1)  # [B, 2]
        carry, _ = ops.scan(step, initial, _columns(emissions, tags, mask))
        score, last = carry[:, 0], ops.cast(carry[:, 1], "int32")
        return score + ops.where(last >= 0, ops.take(end, ops.maximum(last, 0)), 0.0)

    def log_likelihood(self, emissions, tags, padding_mask=None):
        """log p(tags | emissions) per row: float32 `[B]` (its negation is the training loss)."""
        return self.path_score(emissions, tags, padding_mask) - self.log_partition(emissions, padding_mask)

    def call(self, emissions, padding_mask=None, tags=None):
        if tags is not None:
            return -self.log_likelihood(emissions, tags, padding_mask)
        return self.decode(emissions, padding_mask)[0]

    def decode(self, emissions, padding_mask=None):
        """(Viterbi tags int32 `[B, S]`, 0 at padding; their score float32 `[B]`)."""
        emissions, mask = self._prepared(emissions, padding_mask)
        transitions = ops.cast(self.transitions, "float32")[None, :, :]
        start = ops.cast(self.start_transitions, "float32")
        tags = self.num_tags

        def forward(carry, inputs):
            delta, started = _unpacked(carry)  # [B, T] best score ending in each tag, [B]
            emission, real = _unpacked(inputs)
            candidates = delta[:, :, None] + transitions  # [B, from, to]
            best_from = ops.cast(ops.argmax(candidates, axis=1), "int32")  # [B, T]
            new = ops.where(started[:, None], ops.max(candidates, axis=1) + emission, start[None, :] + emission)
            # Where this token is padding, or starts the chain, the pointer keeps the tag itself.
            keep = ops.broadcast_to(ops.arange(tags, dtype="int32")[None, :], ops.shape(best_from))
            pointer = ops.where((real & started)[:, None], best_from, keep)
            # Stacked in the carry's form: the TensorFlow backend's scan writes its outputs so.
            return _packed(ops.where(real[:, None], new, delta), started | real), _packed(pointer, started)

        carry, pointers = ops.scan(forward, _start(emissions), _columns(emissions, mask))  # [B, T + 1], [S, B, T + 1]
        delta = _unpacked(carry)[0]
        pointers = pointers[..., :-1]  # [S, B, T] previous tags (float32, as scanned)
        final = delta + ops.cast(self.end_transitions, "float32")[None, :]
        last = ops.cast(ops.argmax(final, axis=1), "int32")  # [B]
        score = ops.where(ops.any(mask, axis=0), ops.max(final, axis=1), 0.0)

        def backward(tag, inputs):  # from the last step to the first; tags as float32, as the carry
            pointer, real = _unpacked(inputs)
            pointer, tag = ops.cast(pointer, "int32"), ops.cast(tag, "int32")
            previous = ops.take_along_axis(pointer, tag[:, None], axis=1)[:, 0]
            return ops.cast(previous, "float32"), ops.cast(ops.where(real, tag, 0), "float32")

        _, path = ops.scan(backward, ops.cast(last, "float32"), _columns(pointers, mask), reverse=True)  # [S, B]
        return ops.cast(ops.transpose(path, (1, 0)), "int32"), score

    def compute_output_shape(self, emissions_shape, padding_mask_shape=None, tags_shape=None):
        return tuple(emissions_shape[:1]) if tags_shape is not None else tuple(emissions_shape[:2])

    def compute_output_spec(self, emissions, padding_mask=None, tags=None):
        if tags is not None:
            return keras.KerasTensor(tuple(emissions.shape[:1]), dtype="float32")
        return keras.KerasTensor(tuple(emissions.shape[:2]), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({"num_tags": self.num_tags, "initializer": keras.initializers.serialize(self.initializer)})
        return config
