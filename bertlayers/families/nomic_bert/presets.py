"""NomicBERT's size (`nomic-embed-text-v1`, `-v1.5`), as a named preset (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def nomic_bert_config(num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072, **fields):
    """NomicBERT's architecture: BERT's post-norm encoder with rotary attention (θ 1,000) and
    SwiGLU, no biases in attention and feed-forward, 2,048 positions, BERT's 30,528-token
    WordPiece vocabulary and two segments."""
    arguments = dict(
        architecture="bert",
        vocabulary_size=30528,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        activation="silu",
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=2048,
        learned_positions=False,
        attention="rotary",
        rotary_theta=1000.0,
        feed_forward="gated",
        use_bias=False,
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("nomic_embed_text_v1_5", nomic_bert_config())
