"""Model families, one folder each (its layers, encoder, pretrainer, data objective, recipe,
presets and checkpoint mapping), BERT's and ALBERT's included.

Importing a family registers it: its recipes (`bertlayers.families.recipes`), presets
(`bertlayers.networks.presets`), Keras classes and Hugging Face model_types
(`bertlayers.convert.huggingface`). A new family is a new folder and one name on the line below
(docs/adding-a-family.md).
"""

from bertlayers.families import (  # noqa: F401
    albert,
    bert,
    deberta_v2,
    distilbert,
    electra,
    elmo,
    eurobert,
    gemma3,
    gte,
    modernbert,
    nomic_bert,
    qwen3,
    roberta,
    spanbert,
    xlnet,
)
