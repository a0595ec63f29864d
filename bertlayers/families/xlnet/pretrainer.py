"""XLNet's pretrainer: the two-stream model over an `XLNetEncoder`, trained on permutation LM."""

import keras

from bertlayers.families.xlnet.encoder import QueryStream
from bertlayers.families.xlnet.tied_output_projection import TiedOutputProjection
from bertlayers.models.encoder_model import encoder_inputs
from bertlayers.models.pretrainer import PretrainerBase


@keras.saving.register_keras_serializable(package="bertlayers")
class XLNetPretrainer(PretrainerBase):
    """Permutation language modeling: the query stream predicts each target token.

    Inputs: the encoder's (`token_ids`, `segment_ids`, `padding_mask`), `perm_mask` float
    `[B, S, S]` (1: i may not see j) and `target_mapping` float `[B, T, S]` (one-hot rows;
    all-zero rows for unused predictions, weighted out of the loss).
    Output `plm`: float32 logits `[B, T, V]`, trained against the target tokens.

    Args:
      encoder: an `XLNetEncoder` (its memory, if any, is not used here).
    """

    uses_pooled_output = False

    def __init__(self, encoder, name="xlnet_pretrainer", trainable=True, **kwargs):
        inputs = encoder_inputs()
        inputs["perm_mask"] = keras.Input(shape=(None, None), name="perm_mask")
        inputs["target_mapping"] = keras.Input(shape=(None, None), name="target_mapping")
        content = encoder.embeddings(inputs["token_ids"], inputs["segment_ids"])  # [B, S, H]
        query = encoder.mask_embedding(inputs["target_mapping"])  # [B, T, H]
        query = QueryStream(encoder, name="query_stream")(
            content, query, inputs["padding_mask"], inputs["segment_ids"], inputs["perm_mask"], inputs["target_mapping"]
        )  # [B, T, H]
        lm_head = TiedOutputProjection(encoder.token_embedding, dtype=encoder.layer_dtype_policy, name="lm_head")
        outputs = {"plm": lm_head(query)}  # [B, T, V]
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.head_names = ["plm"]

    def unused_layers(self):
        return [self.encoder.pooler]
