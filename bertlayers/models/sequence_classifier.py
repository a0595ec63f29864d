"""Sequence classification and regression (single sentences and sentence pairs)."""

import keras

from bertlayers.layers.classification_head import ClassificationHead
from bertlayers.models.logits_model import HeadInput, LogitsModel


@keras.saving.register_keras_serializable(package="bertlayers")
class SequenceClassifier(LogitsModel):
    """BERT fine-tuning for classification: logits = W · Dropout(pooled_output) + b.

    Inputs: the encoder's. Output `logits`: float32 `[batch, num_classes]`, or `[batch, 1]`
    scores for regression (`num_classes=1`, trained with mean squared error).

    Args:
      encoder: a `BertEncoder` or `AlbertEncoder` (pretrained, typically).
      num_classes: number of labels; 1 for regression.
      dropout: dropout before the output layer (0.1 in BERT).
      label_names: the label strings by class id (saved with the model; an export serves
        them as `label_name`). `num_classes` may then be left out.
      pooling: what the head reads: "pooler" (the encoder's pooled output) or "mean" / "first" /
        "max" over the sequence output (see `LogitsModel`); "mean" for a sentence-embedding
        checkpoint, whose pooler was never trained.
      feature_based: freeze the encoder and classify the final states of a BiLSTM
        (`lstm_units` per direction) over a learned scalar mix of all its hidden states
        (ELMo style; see `LogitsModel`).
      output_bias: whether the output layer has a bias; transformers' last-token classifiers of
        decoder families (`Qwen3ForSequenceClassification`'s `score`) have none.
      pad_id: with `pooling="last"`, a token id the head never reads: transformers' decoder
        classifiers read the last token whose id is not the config's `pad_token_id`, so an
        end-of-text token that doubles as the pad token (Qwen3's `<|endoftext|>`) is passed over.
    """

    def __init__(
        self,
        encoder: keras.Model,
        num_classes: int | None = None,
        dropout: float = 0.1,
        label_names: list[str] | None = None,
        pooling: str = "pooler",
        feature_based: bool = False,
        lstm_units: int = 256,
        output_bias: bool = True,
        pad_id: int | None = None,
        name: str = "sequence_classifier",
        **kwargs,
    ) -> None:
        if label_names is not None:
            label_names = [str(name) for name in label_names]
            if num_classes is None:
                num_classes = len(label_names)
            if len(label_names) != num_classes or num_classes < 2:
                raise ValueError(
                    f"label_names needs one name per class of a classifier with at least 2 classes; "
                    f"got {len(label_names)} names for num_classes={num_classes}."
                )
        if num_classes is None:
            raise ValueError("SequenceClassifier needs num_classes or label_names.")
        pad_id = None if pad_id is None else int(pad_id)
        head_input = HeadInput(
            per_token=False, pooling=pooling, feature_based=feature_based, lstm_units=lstm_units, pad_id=pad_id
        )
        super().__init__(
            encoder,
            num_classes,
            ClassificationHead,
            head_input,
            dropout=dropout,
            head_options={"use_bias": bool(output_bias)},
            name=name,
            **kwargs,
        )
        self.label_names = label_names
        self.output_bias = bool(output_bias)
        self.pad_id = pad_id

    def _constructor_args(self):
        return {
            **super()._constructor_args(),
            "label_names": self.label_names,
            "pooling": self.pooling,
            "output_bias": self.output_bias,
            "pad_id": self.pad_id,
        }

    def default_losses(self):
        if self.num_classes == 1:
            return {"logits": keras.losses.MeanSquaredError()}
        return super().default_losses()

    def default_metrics(self):
        return {} if self.num_classes == 1 else super().default_metrics()
