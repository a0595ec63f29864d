"""ELMo's pretraining recipe: the biLM on the corpus's sentences (`--recipe elmo`).

Words and characters come from the text itself (`elmo.data`), not from WordPiece records:
`--vocabulary` is a words.txt (default: the corpus's `--vocabulary_size` most frequent words,
10,000 if not given), `--sequence_length` counts words with <S> and </S>, `--eval_corpus`
measures each direction's loss on held-out text (its exponential: the perplexity).
"""

from bertlayers.families.elmo.bilm import BidirectionalLanguageModel
from bertlayers.families.elmo.data import pretraining_word_batches
from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.pretraining_data.objectives import DataObjective
from bertlayers.utils.validation import POSITIVE_INT

OBJECTIVE = DataObjective(examples="single", masking=None, batch_inputs=None, inputs=pretraining_word_batches)


def build_pretrainer(encoder_config, dtype, options):
    """The biLM: the softmax over the run's words (`encoder_config.vocabulary_size`), dropout from
    the run (`--dropout`, else the preset's); the sizes are the recipe's options."""
    return BidirectionalLanguageModel(
        encoder_config.vocabulary_size,
        num_layers=options["num_layers"],
        units=options["units"],
        projection_units=options["projection_units"],
        dropout=encoder_config.dropout,
        dtype=dtype,
    )


RECIPE = register_recipe(
    Recipe(
        "elmo",
        "ELMo's biLM: character CNN, forward and backward LSTM language models (Peters et al. 2018)",
        OBJECTIVE,
        build_pretrainer,
        loss_key="forward_loss",
        options={
            "num_layers": Option(2, POSITIVE_INT, "LSTM layers per direction"),
            "units": Option(512, POSITIVE_INT, "LSTM cell width"),
            "projection_units": Option(128, POSITIVE_INT, "each layer's output width per direction"),
        },
        report=("backward_loss",),
        continues_checkpoint=False,
    )
)
