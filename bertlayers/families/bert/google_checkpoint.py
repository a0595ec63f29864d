"""google-research/bert's TF1 checkpoints: one scope per layer."""

from bertlayers.convert.google import load_google_checkpoint, map_block
from bertlayers.families.bert.encoder import BertEncoder


def map_bert_layers(encoder, config, weights):
    """Each layer's block under `bert/encoder/layer_<i>`."""
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/layer_{index}"
        map_block(
            block,
            config,
            weights,
            f"{prefix}/attention",
            f"{prefix}/attention/output/LayerNorm",
            f"{prefix}/intermediate/dense",
            f"{prefix}/output/dense",
            f"{prefix}/output/LayerNorm",
        )


def load_google_bert(checkpoint_prefix, bert_config_json, pretrainer=True, dtype=None):
    """A `BertPretrainer` (or, with `pretrainer=False`, a `BertEncoder`) from an original
    google-research/bert TF1 checkpoint (`bert_model.ckpt` prefix + `bert_config.json`).

    Optimizer slots and the global step are skipped; any other checkpoint tensor the model
    does not use is reported in a warning, and missing or mis-shaped tensors raise a
    `CheckpointMismatchError` listing all of them.
    """
    return load_google_checkpoint(checkpoint_prefix, bert_config_json, BertEncoder, map_bert_layers, pretrainer, dtype)
