"""The ModernBERT encoder network (Warner et al. 2024), also mmBERT's and the Ettin encoders'."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.pooler import Pooler
from bertlayers.layers.registered import registered_name
from bertlayers.networks.block_parts import NORMALIZATIONS
from bertlayers.networks.encoder_base import EncoderBase


@keras.saving.register_keras_serializable(package="bertlayers")
class ModernBertEncoder(EncoderBase):
    """ModernBERT: token embedding → norm, pre-norm blocks with rotary attention (a base per layer
    kind), a sliding window on the local layers, GeGLU, no biases, a final norm.

    Its differences from the composed encoder are three, each a hook:
      - layer 0's attention reads the embeddings as they are (they end in a norm already:
        transformers' `attn_norm` is an identity there);
      - the pooler is ModernBERT's classifier head, Norm(act(W · summary)), the summary the first
        token or the mean of the real tokens (`EncoderConfig.pooling_position`, `classifier_pooling`);
      - the masked-LM head's transform has the blocks' bias setting and norm kind
        (`head.dense` → act → `head.norm`), before the tied decoder with its bias.
    Everything else comes from the `EncoderConfig` (`bertlayers.families.modernbert.presets`).
    """

    architecture = "modernbert"

    def block_config_at(self, config, depth):
        return {"normalize_attention_input": False} if depth == 0 else {}

    def make_pooler(self, config, dtype):
        return Pooler(
            kernel_initializer=bert_initializer(config.initializer_range),
            position=self.pooling_of(config),
            activation=config.pooler_activation,
            use_bias=config.use_bias,
            normalization=self._normalization_name(config),
            layer_norm_epsilon=config.layer_norm_epsilon,
            dtype=dtype,
            name="pooler",
        )

    def lm_head_arguments(self):
        config = self.config
        return {
            "activation": config.pooler_activation,
            "use_bias": config.use_bias,
            "normalization": self._normalization_name(config),
        }

    @staticmethod
    def _normalization_name(config):
        normalization = NORMALIZATIONS.get(config.normalization)
        return registered_name(normalization) if normalization is not None else "LayerNormalization"
