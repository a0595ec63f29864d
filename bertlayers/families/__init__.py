"""Model families, one folder each (its layers, encoder, pretrainer, data objective, recipe,
presets and checkpoint mapping), and BERT's own objectives as recipes (`bert.py`).

Importing a family registers it: its recipes (`bertlayers.families.recipes`), presets
(`bertlayers.networks.presets`), Keras classes and Hugging Face model_types
(`bertlayers.convert.huggingface`). A new family is a new folder and one name on the line below
(docs/adding-a-family.md).
"""

from bertlayers.families import albert, distilbert, electra, roberta, spanbert, xlnet  # noqa: F401
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # BERT's recipes are tf.data objectives
    from bertlayers.families import bert  # noqa: F401
