"""Token classification (named entities, tagging), each token's softmax or a CRF over the tags."""

import keras

from bertlayers.layers.crf import LinearChainCRF
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.models.logits_model import HeadInput, LogitsModel


@keras.saving.register_keras_serializable(package="bertlayers")
class TokenClassifier(LogitsModel):
    """logits = W · Dropout(sequence_output) + b for every token.

    Inputs: the encoder's. Output `logits`: float32 `[batch, seq, num_classes]`. Train with
    sample weights that are 1 on the tokens that carry a label (the first WordPiece of each
    word, as in BERT's NER) and 0 elsewhere.

    With `crf=True` a linear-chain CRF (`bertlayers.layers.LinearChainCRF`) sits on the logits:
    the model also outputs `tags`, int32 `[batch, seq]`, the best tag path over the real tokens
    (Viterbi), and trains on the negative log-likelihood of the gold path, averaged over the
    sequences (`compile` needs no loss). Every real token is on the chain, so label every one,
    `{"tags": [batch, seq]}` (`bertlayers.task_data.ner.encode_sentences(every_piece=True)`:
    a word's later pieces continue its entity, the special tokens are "O").

    With `feature_based=True` the encoder is frozen and each token's logits read a BiLSTM
    (`lstm_units` per direction) over a learned scalar mix of all its hidden states (ELMo's
    tagger; see `LogitsModel`).

    `tag_names` (optional, one a class, saved in the config) name the tags, for the text-in tagger
    (`bertlayers.tasks.TextTagger`) and a reader of the saved model.
    """

    def __init__(
        self,
        encoder: keras.Model,
        num_classes: int | None = None,
        dropout: float = 0.1,
        crf: bool = False,
        name: str = "token_classifier",
        tag_names: list[str] | None = None,
        feature_based: bool = False,
        lstm_units: int = 256,
        **kwargs,
    ) -> None:
        if tag_names is not None:
            tag_names = [str(tag) for tag in tag_names]
            num_classes = len(tag_names) if num_classes is None else num_classes
            if len(tag_names) != num_classes:
                raise ValueError(f"tag_names needs one name per class: {len(tag_names)} names for {num_classes}.")
        if num_classes is None:
            raise ValueError("TokenClassifier needs num_classes or tag_names.")
        decoder = None
        if crf:
            decoder = LinearChainCRF(
                num_classes,
                initializer=bert_initializer(encoder.config.initializer_range),
                dtype=encoder.layer_dtype_policy,
                name="crf",
            )
        super().__init__(
            encoder,
            num_classes,
            TokenClassificationHead,
            HeadInput(per_token=True, feature_based=feature_based, lstm_units=lstm_units),
            dropout=dropout,
            decoder=decoder,
            name=name,
            **kwargs,
        )
        self.crf = decoder
        self.tag_names = tag_names

    def _constructor_args(self):
        return {**super()._constructor_args(), "crf": self.crf is not None, "tag_names": self.tag_names}

    def default_losses(self):
        return None if self.crf is not None else super().default_losses()

    def default_metrics(self):
        return None if self.crf is not None else super().default_metrics()

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.crf is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        gold = y.get("tags") if isinstance(y, dict) else y
        if gold is None:
            raise ValueError("A CRF tagger trains on gold tags: y={'tags': int [batch, seq]}.")
        return self.reduced_loss(self.crf(y_pred["logits"], x["padding_mask"], tags=gold))  # −log p(gold) [B]
