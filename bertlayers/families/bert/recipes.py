"""BERT and the recipes that vary its objective: ALBERT, RoBERTa, and the left-to-right LM.

bert:    NSP pairs, static masking, masked LM + next-sentence prediction.
albert:  SOP pairs, factorized embedding + shared layers, masked LM + sentence order.
roberta: single segments of full sentences, dynamic masking, masked LM only.
ltr:     single segments, causal attention, next-token prediction (the BERT paper's
         "LTR & No NSP" ablation).
"""

from bertlayers.families.recipes import Recipe, register_recipe
from bertlayers.models.pretrainer import BertPretrainer, CausalLMPretrainer
from bertlayers.networks import build_encoder
from bertlayers.pretraining_data.objectives import OBJECTIVES


def _masked_lm(next_sentence):
    def build(encoder_config, dtype, options):
        return BertPretrainer(build_encoder(encoder_config, dtype=dtype, name="encoder"), next_sentence=next_sentence)

    return build


def _albert_encoder(config):
    if config.architecture == "albert":
        return config
    return config.replace(architecture="albert", embedding_size=min(128, config.hidden_size))


def _causal_lm(encoder_config, dtype, options):
    return CausalLMPretrainer(build_encoder(encoder_config, dtype=dtype, name="encoder"))


register_recipe(
    Recipe("bert", "masked LM + next-sentence prediction (Devlin et al. 2018)", OBJECTIVES["mlm_nsp"], _masked_lm(True))
)
register_recipe(
    Recipe(
        "albert",
        "factorized embedding, shared layers, masked LM + sentence order (Lan et al. 2019)",
        OBJECTIVES["mlm_sop"],
        _masked_lm(True),
        encoder_config=_albert_encoder,
    )
)
register_recipe(
    Recipe(
        "roberta",
        "dynamic masking, full sentences, masked LM only (Liu et al. 2019)",
        OBJECTIVES["mlm"],
        _masked_lm(False),
    )
)
register_recipe(
    Recipe(
        "ltr",
        "left-to-right LM, the BERT paper's LTR & No NSP ablation",
        OBJECTIVES["ltr"],
        _causal_lm,
        loss_key="lm_loss",
        encoder_config=lambda config: config.replace(causal=True),
        continues_checkpoint=False,  # a bidirectional checkpoint made causal is not a continuation
    )
)
