"""SavedModel export for TF Serving: token ids in, and raw text in."""

from bertlayers.export.saved_model import ExportOptions, export_for_serving
from bertlayers.export.serving_folder import next_version, recover_exports, write_models_config
from bertlayers.export.serving_outputs import (
    ClassifierOutputs,
    EncoderOutputs,
    ModelOutputs,
    MultiTaskOutputs,
    SpanOutputs,
    TaggerOutputs,
)
from bertlayers.tokenizers.wordpiece import InGraphTokenizer

__all__ = [
    "ClassifierOutputs",
    "EncoderOutputs",
    "ExportOptions",
    "InGraphTokenizer",
    "ModelOutputs",
    "MultiTaskOutputs",
    "SpanOutputs",
    "TaggerOutputs",
    "export_for_serving",
    "next_version",
    "recover_exports",
    "write_models_config",
]
