"""BERT's encoder sizes from the papers, as named presets."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset

# The 24 compact BERTs of Turc et al. 2019 ("Well-Read Students Learn Better"), named as
# Google released them: heads = H/64, intermediate = 4H.
for _layers in (2, 4, 6, 8, 10, 12):
    for _hidden in (128, 256, 512, 768):
        register_preset(
            f"bert_uncased_L-{_layers}_H-{_hidden}_A-{_hidden // 64}",
            EncoderConfig(
                num_layers=_layers,
                hidden_size=_hidden,
                num_heads=_hidden // 64,
                intermediate_size=4 * _hidden,
            ),
        )

for _alias, _name in {
    "bert_tiny": "bert_uncased_L-2_H-128_A-2",
    "bert_mini": "bert_uncased_L-4_H-256_A-4",
    "bert_small": "bert_uncased_L-4_H-512_A-8",
    "bert_medium": "bert_uncased_L-8_H-512_A-8",
}.items():
    register_preset(_alias, None, alias_of=_name)

register_preset("bert_base", EncoderConfig())
register_preset("bert_large", EncoderConfig(num_layers=24, hidden_size=1024, num_heads=16, intermediate_size=4096))
