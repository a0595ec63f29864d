"""ModernBERT's pretraining recipe: masked LM alone at a 30% masking rate over full-length
sequences of whole sentences (no next-sentence task), on ModernBERT's architecture at the preset's
sizes.

What it takes from Warner et al. (2024) and what it leaves to the run: the 30% rate, no NSP,
sequences packed full of sentences (the single-segment examples, RoBERTa's "full sentences"),
dynamic masking; the optimizer is the library's AdamW with linear warmup and decay (the paper's
StableAdamW and warmup-stable-decay schedule are not in the library), so set --learning_rate and
--num_warmup_steps as the size needs. The masked positions a sequence may hold cap the rate: pass
--max_predictions_per_seq of at least 0.3 × --sequence_length (the run warns otherwise).
"""

import dataclasses

from bertlayers.families.modernbert.presets import modernbert_config
from bertlayers.families.recipes import Recipe, register_recipe
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.networks import build_encoder
from bertlayers.pretraining_data.objectives import OBJECTIVES

MASKING_RATE = 0.3
OBJECTIVE = dataclasses.replace(OBJECTIVES["mlm"], masking_rates={"masked_lm_prob": MASKING_RATE})


def modernbert_sized_like(config):
    """ModernBERT's architecture at `config`'s sizes (a BERT preset's): the same layers, width and
    heads, and a GeGLU whose halves are 2/3 of BERT's inner width (three matrices of 2I/3 weigh what
    BERT's two of I do), so the two encoders have about the same weights."""
    if config.architecture == "modernbert":
        return config
    return modernbert_config(
        config.num_layers,
        config.hidden_size,
        config.num_heads,
        max(1, round(2 * config.intermediate_size / 3)),
        vocabulary_size=config.vocabulary_size,
        max_sequence_length=config.max_sequence_length,
        initializer_range=config.initializer_range,
    )


def build_pretrainer(encoder_config, dtype, options):
    return BertPretrainer(build_encoder(encoder_config, dtype=dtype, name="encoder"), next_sentence=False)


RECIPE = register_recipe(
    Recipe(
        "modernbert",
        "ModernBERT's architecture, masked LM at 30%, full sentences, no NSP (Warner et al. 2024)",
        OBJECTIVE,
        build_pretrainer,
        encoder_config=modernbert_sized_like,
        report=("mlm_accuracy",),
    )
)
