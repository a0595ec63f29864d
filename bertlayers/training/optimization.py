"""BERT's optimizer: AdamW (or LAMB), linear warmup then linear decay, global-norm clipping."""

import dataclasses

import keras
from keras import ops

from bertlayers import backend
from bertlayers.utils.options import check_options, option, options_with
from bertlayers.utils.validation import NON_NEGATIVE_FLOAT, POSITIVE_FLOAT, Range

# Variables BERT exempts from weight decay: LayerNorm scales and offsets, and every bias.
NO_DECAY = ("bias", "gamma", "beta")


@keras.saving.register_keras_serializable(package="bertlayers")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak · step / warmup for step < warmup, then peak · (total − step) / (total − warmup),
    reaching `end_learning_rate` at `total_steps` and staying there."""

    def __init__(
        self, peak_learning_rate: float, total_steps: int, warmup_steps: int, end_learning_rate: float = 0.0
    ) -> None:
        if total_steps <= 0 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"Need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}) and total_steps > 0."
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak, end = self.peak_learning_rate, self.end_learning_rate
        warmup = peak * step / max(self.warmup_steps, 1)
        decay_span = max(self.total_steps - self.warmup_steps, 1)
        progress = ops.clip((step - self.warmup_steps) / decay_span, 0.0, 1.0)
        decay = end + (peak - end) * (1.0 - progress)
        return ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
        }


class SumThenClip:
    """Under tf.distribute, sum gradients across replicas before clipping them.

    Keras 3.15 clips each replica's partial gradient and only then sums the replicas
    (`_backend_apply_gradients` runs `_clip_gradients` before `_backend_update_step`), so a
    global norm of 1.0 lets a 2-replica step reach norm 2 and training differs from one
    device. Here the all-reduce moves ahead of the clipping and Keras's own all-reduce is
    skipped; with one replica nothing changes. Verified for Keras 3.15 only: other versions
    keep Keras's behaviour.
    """

    _FIXED_IN = "3.15."

    def _clip_gradients(self, grads):
        tf = backend.tensorflow()
        context = tf.distribute.get_replica_context() if tf else None
        clips = self.clipnorm or self.global_clipnorm or self.clipvalue
        if (
            clips
            and keras.__version__.startswith(self._FIXED_IN)
            and context is not None
            and context.num_replicas_in_sync > 1
        ):
            present = [g for g in grads if g is not None]
            summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
            grads = [None if g is None else next(summed) for g in grads]
            self._gradients_summed = True  # read while tracing the same step, below
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if getattr(self, "_gradients_summed", False):
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


class LayerwiseRates:
    """Per-variable learning-rate multipliers (layer-wise learning-rate decay).

    Scaling gradients would not do: Adam normalizes them away. The multiplier scales the
    learning rate inside each variable's update step. Weight decay keeps the base rate.
    """

    def set_learning_rate_multipliers(self, multipliers):
        """`multipliers`: {id(variable): factor}; must be set before the optimizer is built."""
        if self.built:
            raise ValueError("Set learning-rate multipliers before the optimizer is built.")
        self._multipliers_by_id = dict(multipliers)

    def build(self, variables):
        super().build(variables)
        by_id = getattr(self, "_multipliers_by_id", None) or {}
        self._multiplier_by_index = [float(by_id.get(id(v), 1.0)) for v in variables]

    def update_step(self, gradient, variable, learning_rate):
        factors = getattr(self, "_multiplier_by_index", None)
        if factors:
            factor = factors[self._get_variable_index(variable)]
            if factor != 1.0:
                learning_rate = learning_rate * factor
        super().update_step(gradient, variable, learning_rate)


class FusedAdamStep:
    """Adam's moment and variable updates as one fused TensorFlow kernel per variable.

    Keras's `Adam.update_step` is about ten element-wise ops, each a pass over the variable
    and its moments: for a MiniLM classifier (23M weights) that is most of a fine-tuning step's
    non-matmul time. TensorFlow's `ResourceApplyAdam` computes the same formula (m += (g − m)(1 −
    β1); v += (g² − v)(1 − β2); w −= α·m / (√v + ε), α = lr·√(1 − β2^t) / (1 − β1^t)) in one
    pass. Other backends, AMSGrad and non-float32 variables keep Keras's step. The global norm
    for clipping is likewise TensorFlow's one-pass `global_norm` (same value up to rounding).
    """

    def _fused(self, variable):
        return backend.fused_adam_step(variable) and not self.amsgrad

    def _step_scalars(self, learning_rate):
        """(lr, β1^t, β2^t, β1, β2, ε) as float32 tensors, made once a step for every variable the
        step updates: Keras evaluates the learning rate once a step and hands each variable that
        tensor (under a strategy, each device its own), so it keys the cache. Built per variable
        they were over a third of a small model's traced train step (ten ops a variable)."""
        cache = self.__dict__.setdefault("_scalars_by_rate", {})
        hit = cache.get(id(learning_rate))
        if hit is not None and hit[0] is learning_rate:
            return hit[1]
        tf = backend.tensorflow()
        step = tf.cast(self.iterations + 1, tf.float32)
        beta_1, beta_2 = tf.constant(self.beta_1, tf.float32), tf.constant(self.beta_2, tf.float32)
        scalars = dict(
            lr=tf.cast(learning_rate, tf.float32),
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.constant(self.epsilon, tf.float32),
        )
        if len(cache) >= 64:  # the entries of earlier steps (each holds its rate, so no id is reused)
            cache.clear()
        cache[id(learning_rate)] = (learning_rate, scalars)
        return scalars

    def update_step(self, gradient, variable, learning_rate):
        if not self._fused(variable):
            return super().update_step(gradient, variable, learning_rate)
        tf = backend.tensorflow()
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(self._momentums[index]),
            v=_handle(self._velocities[index]),
            grad=tf.convert_to_tensor(tf.cast(gradient, tf.float32)),  # a sparse embedding gradient too
            **self._step_scalars(learning_rate),
        )

    def _apply_weight_decay(self, variables):
        """Keras's decoupled weight decay (w -= w·wd·lr), with wd·lr made once a step rather than
        the schedule evaluated again for every variable."""
        tf = backend.tensorflow()
        if tf is None or self.weight_decay is None:
            return super()._apply_weight_decay(variables)
        rate = tf.cast(self.learning_rate, tf.float32) * self.weight_decay

        def decay(variable, rate):
            variable.assign_sub(variable * tf.cast(rate, variable.dtype))

        def apply(distribution, variables, rate):
            for variable in variables:
                if self._use_weight_decay(variable):
                    value = variable.value if isinstance(variable, keras.Variable) else variable
                    distribution.extended.update(value, decay, args=(rate,), group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(apply, self._distribution_strategy, variables, rate)

    def _clip_gradients(self, grads):
        tf = backend.tensorflow()
        if tf is not None and self.global_clipnorm and not self.clipnorm:
            # tf.clip_by_global_norm skips None entries and keeps the list's positions.
            return tf.clip_by_global_norm(grads, self.global_clipnorm)[0]
        return super()._clip_gradients(grads)


def _handle(variable):
    """The resource handle of a Keras or tf.Variable."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


@keras.saving.register_keras_serializable(package="bertlayers")
class AdamW(LayerwiseRates, SumThenClip, FusedAdamStep, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with cross-replica clipping (`SumThenClip`), optional layer-wise
    rates (`LayerwiseRates`) and Adam's update fused into one kernel (`FusedAdamStep`)."""


@keras.saving.register_keras_serializable(package="bertlayers")
class Lamb(LayerwiseRates, SumThenClip, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` with cross-replica clipping and optional layer-wise rates."""


def layerwise_decay_multipliers(model, decay):
    """{id(variable): decay^(depth below the top)} for a model built on `model.encoder`.

    The top (pooler, task heads) trains at the full rate; transformer layer i of L at
    decay^(L - i); the embeddings at decay^(L + 1). ALBERT's shared blocks count as the
    layer at their first use.
    """
    encoder = model.encoder
    blocks = encoder.transformer_layers
    depth_of = {id(v): 0 for v in encoder.embeddings.trainable_variables}
    for index, block in enumerate(blocks):
        for v in block.trainable_variables:
            depth_of[id(v)] = index + 1
    top = len(blocks) + 1
    return {id(v): decay ** (top - depth_of.get(id(v), top)) for v in model.trainable_variables}


OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass
class OptimizerOptions:
    """The optimizer's settings besides its schedule (each with its help and range)."""

    optimizer: str = option("adamw", "adamw, or lamb (large-batch training, as in the LAMB paper)", choices=OPTIMIZERS)
    weight_decay: float = option(
        0.01, "decoupled weight decay, not on LayerNorm parameters or biases", NON_NEGATIVE_FLOAT
    )
    clip_global_norm: float | None = option(
        1.0, "clip gradients to this global norm (None: no clipping)", POSITIVE_FLOAT
    )
    beta_1: float = option(0.9, "Adam's first-moment decay", Range(float, 0, 1, high_open=True))
    beta_2: float = option(0.999, "Adam's second-moment decay", Range(float, 0, 1, high_open=True))
    epsilon: float = option(1e-6, "Adam's epsilon", POSITIVE_FLOAT)
    layerwise_decay: float | None = option(
        None,
        "with the model: layer i of L trains at decay^(L - i) times the heads' rate",
        Range(float, 0, 1, low_open=True),
    )

    def __post_init__(self):
        check_options(self)


def create_optimizer(
    learning_rate: float,
    total_steps: int,
    warmup_steps: int,
    model: keras.Model | None = None,
    options: OptimizerOptions | None = None,
    **settings,
) -> keras.optimizers.Optimizer:
    """The optimizer of BERT pretraining and fine-tuning.

    Args:
      learning_rate: the peak learning rate.
      total_steps, warmup_steps: the schedule's length and linear warmup.
      model: the model built on an encoder, for `layerwise_decay` (lower layers learn slower).
      options: an `OptimizerOptions`; `settings` (its fields by name: `optimizer="lamb"`,
        `weight_decay=0.0`, `clip_global_norm=None`, `layerwise_decay=0.9`, ...) change it.
    """
    options = options_with(OptimizerOptions, options, settings, "create_optimizer")
    optimizer, weight_decay, clip_global_norm = options.optimizer, options.weight_decay, options.clip_global_norm
    beta_1, beta_2, epsilon, layerwise_decay = options.beta_1, options.beta_2, options.epsilon, options.layerwise_decay
    schedule = WarmupLinearDecay(learning_rate, total_steps, warmup_steps)
    common = dict(
        learning_rate=schedule,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        weight_decay=weight_decay,
        global_clipnorm=clip_global_norm,
    )
    if optimizer == "adamw":
        result = AdamW(**common)
    elif optimizer == "lamb":
        result = Lamb(**common)
    else:
        raise ValueError(f"Unknown optimizer {optimizer!r}; use 'adamw' or 'lamb'.")
    result.exclude_from_weight_decay(var_names=list(NO_DECAY))
    if layerwise_decay is not None and layerwise_decay != 1.0:
        if model is None:
            raise ValueError("layerwise_decay needs the model whose encoder's layers it ranks.")
        result.set_learning_rate_multipliers(layerwise_decay_multipliers(model, layerwise_decay))
    return result
