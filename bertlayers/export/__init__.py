"""SavedModel export for TF Serving: token ids in, and raw text in."""

from bertlayers.export.saved_model import EndpointPart, ExportOptions, export_endpoint, export_for_serving
from bertlayers.export.serving_folder import check_serving_base, next_version, recover_exports, write_models_config
from bertlayers.export.serving_outputs import (
    AnswerScoreOutputs,
    ClassifierOutputs,
    EmbeddingOutputs,
    EncoderOutputs,
    ModelOutputs,
    MultiTaskOutputs,
    SpanOutputs,
    SparseOutputs,
    TaggerOutputs,
)
from bertlayers.export.tflite import export_tflite, tflite_interpreter, tflite_predictor
from bertlayers.tokenizers.wordpiece import InGraphTokenizer

__all__ = [
    "AnswerScoreOutputs",
    "ClassifierOutputs",
    "EmbeddingOutputs",
    "EncoderOutputs",
    "EndpointPart",
    "ExportOptions",
    "InGraphTokenizer",
    "ModelOutputs",
    "MultiTaskOutputs",
    "SpanOutputs",
    "SparseOutputs",
    "TaggerOutputs",
    "check_serving_base",
    "export_endpoint",
    "export_for_serving",
    "export_tflite",
    "next_version",
    "recover_exports",
    "tflite_interpreter",
    "tflite_predictor",
    "write_models_config",
]
