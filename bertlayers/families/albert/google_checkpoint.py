"""google-research/albert's TF1 checkpoints: one scope per shared layer group."""

from bertlayers.convert.google import load_google_checkpoint, map_attention, map_dense, map_layer_norm
from bertlayers.families.albert.encoder import AlbertEncoder


def map_albert_layers(encoder, config, weights):
    """The E -> H projection and each group's block under `bert/encoder/transformer/group_<g>`."""
    map_dense(encoder.embeddings.embedding_projection, "bert/encoder/embedding_hidden_mapping_in", weights)
    for group, block in enumerate(encoder.transformer_layers):
        prefix = f"bert/encoder/transformer/group_{group}/inner_group_0"
        map_attention(block, f"{prefix}/attention_1", config, weights)
        map_layer_norm(block.attention_layer_norm, f"{prefix}/LayerNorm", weights)
        map_dense(block.intermediate_dense, f"{prefix}/ffn_1/intermediate/dense", weights)
        map_dense(block.output_dense, f"{prefix}/ffn_1/intermediate/output/dense", weights)
        map_layer_norm(block.output_layer_norm, f"{prefix}/LayerNorm_1", weights)


def load_google_albert(checkpoint_prefix, albert_config_json, pretrainer=True, dtype=None):
    """The same as `load_google_bert` for google-research/albert TF1 checkpoints (shared layer groups)."""
    return load_google_checkpoint(
        checkpoint_prefix, albert_config_json, AlbertEncoder, map_albert_layers, pretrainer, dtype
    )
