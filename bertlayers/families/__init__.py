"""Model families, one module each: its pretrainer, its data objective and its recipes.

Importing this package registers every family's recipes (`bertlayers.families.recipes`).
A new family is a new module here, imported below.
"""

from bertlayers.families import bert, electra, spanbert, xlnet  # noqa: F401
