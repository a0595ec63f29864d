"""google-research/albert's TF1 checkpoints: one scope per shared layer group."""

from bertlayers.convert.google import load_google_checkpoint, map_block, map_dense
from bertlayers.families.albert.encoder import AlbertEncoder


def map_albert_layers(encoder, config, weights):
    """The E -> H projection and each group's block under `bert/encoder/transformer/group_<g>`."""
    map_dense(encoder.embeddings.embedding_projection, "bert/encoder/embedding_hidden_mapping_in", weights)
    for group, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/transformer/group_{group}/inner_group_0"
        map_block(
            block,
            config,
            weights,
            f"{prefix}/attention_1",
            f"{prefix}/LayerNorm",
            f"{prefix}/ffn_1/intermediate/dense",
            f"{prefix}/ffn_1/intermediate/output/dense",
            f"{prefix}/LayerNorm_1",
        )


def load_google_albert(checkpoint_prefix, albert_config_json, pretrainer=True, dtype=None):
    """The same as `load_google_bert` for google-research/albert TF1 checkpoints (shared layer groups)."""
    return load_google_checkpoint(
        checkpoint_prefix, albert_config_json, AlbertEncoder, map_albert_layers, pretrainer, dtype
    )
