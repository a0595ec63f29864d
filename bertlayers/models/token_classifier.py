"""Token classification (named entities, tagging)."""

import keras

from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.models.logits_model import LogitsModel


@keras.saving.register_keras_serializable(package="bertlayers")
class TokenClassifier(LogitsModel):
    """logits = W · Dropout(sequence_output) + b for every token.

    Inputs: the encoder's. Output `logits`: float32 `[batch, seq, num_classes]`. Train with
    sample weights that are 1 on the tokens that carry a label (the first WordPiece of each
    word, as in BERT's NER) and 0 elsewhere.

    With `feature_based=True` the encoder is frozen and each token's logits read a BiLSTM
    (`lstm_units` per direction) over a learned scalar mix of all its hidden states (ELMo's
    tagger; see `LogitsModel`).
    """

    encoder_output = "sequence_output"
    head_class = TokenClassificationHead

    def __init__(self, encoder, num_classes, dropout=0.1, name="token_classifier", **kwargs):
        super().__init__(encoder, num_classes, dropout=dropout, name=name, **kwargs)
