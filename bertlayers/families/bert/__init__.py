"""BERT (Devlin et al. 2018): its encoder, Hugging Face and Google checkpoints, and the recipes
that vary its objective (BERT's own, ALBERT's, RoBERTa's and the left-to-right LM).

Importing it registers the encoder (architecture "bert"), the recipes "bert", "albert",
"roberta" and "ltr", and transformers' model_type "bert". Its pretrainer, the masked LM with an
optional sentence head, is shared with the families that keep BERT's objective
(`bertlayers.models.BertPretrainer`); its presets are the library's defaults
(`bertlayers.networks.presets`).
"""

from bertlayers.families.bert import presets  # noqa: F401  (registers the presets)
from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoints with their tokenizer; tf.data objectives
    from bertlayers.families.bert import recipes  # noqa: F401  (registers the recipes)
    from bertlayers.families.bert.checkpoint import load_huggingface_bert
    from bertlayers.families.bert.google_checkpoint import load_google_bert

__all__ = ["BertEncoder", "load_google_bert", "load_huggingface_bert"]
