"""ELMo (Peters et al. 2018): the character CNN's words, the bidirectional LSTM language model,
and its layers mixed into ELMo vectors (`bertlayers.layers.ScalarMix`).

The library's own biLM, trained from scratch (`BidirectionalLanguageModel`, `--recipe elmo`); no
published ELMo weights are read yet. Importing it registers the recipe "elmo".
"""

from bertlayers.families.elmo.bilm import (
    BidirectionalLanguageModel,
    LanguageModelLstm,
    ProjectedLstmCell,
    reverse_within_lengths,
)
from bertlayers.families.elmo.character_cnn import CharacterCnn
from bertlayers.families.elmo.characters import batch_character_ids, character_ids, sentence_character_ids
from bertlayers.families.elmo.highway import Highway
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # the data path and the recipe are tf.data
    from bertlayers.families.elmo.data import WordVocabulary, bilm_words, word_batches
    from bertlayers.families.elmo.features import WordFeatureBatches, word_feature_classifier, word_feature_inputs
    from bertlayers.families.elmo.recipe import OBJECTIVE, RECIPE

__all__ = [
    "BidirectionalLanguageModel",
    "CharacterCnn",
    "Highway",
    "LanguageModelLstm",
    "OBJECTIVE",
    "RECIPE",
    "batch_character_ids",
    "WordFeatureBatches",
    "WordVocabulary",
    "ProjectedLstmCell",
    "character_ids",
    "reverse_within_lengths",
    "sentence_character_ids",
    "word_batches",
    "word_feature_classifier",
    "word_feature_inputs",
    "bilm_words",
]
