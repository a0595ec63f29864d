"""ELMo (Peters et al. 2018): the character CNN's words, the bidirectional LSTM language model,
and its layers mixed into ELMo vectors (`bertlayers.layers.ScalarMix`).

The library's own biLM, trained from scratch (`BidirectionalLanguageModel`); no published ELMo
weights are read yet.
"""

from bertlayers.families.elmo.bilm import (
    BidirectionalLanguageModel,
    LanguageModelLstm,
    ProjectedLstmCell,
    reverse_within_lengths,
)
from bertlayers.families.elmo.characters import character_ids, sentence_character_ids

__all__ = [
    "BidirectionalLanguageModel",
    "LanguageModelLstm",
    "ProjectedLstmCell",
    "character_ids",
    "reverse_within_lengths",
    "sentence_character_ids",
]
