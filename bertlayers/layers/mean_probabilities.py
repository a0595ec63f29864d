"""The log of several classifiers' mean class probabilities: how an ensemble answers."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class MeanProbabilities(keras.layers.Layer):
    """log((1/N) Σ_i softmax(logits_i)): N logit tensors `[B, C]` in, `[B, C]` float32 out (the log
    of the averaged probabilities, computed stably as logsumexp_i(log_softmax(logits_i)) - log N)."""

    def call(self, logits):
        stacked = ops.stack([ops.log_softmax(ops.cast(x, "float32"), axis=-1) for x in logits])  # [N, B, C]
        return ops.logsumexp(stacked, axis=0) - ops.log(float(len(logits)))

    def compute_output_spec(self, logits):
        return keras.KerasTensor(logits[0].shape, dtype="float32")
