"""SavedModel export for TF Serving: token ids in, and raw text in."""

from bertlayers.export.saved_model import export_for_serving, next_version, recover_exports, write_models_config
from bertlayers.export.text_tokenizer import InGraphTokenizer

__all__ = ["InGraphTokenizer", "export_for_serving", "next_version", "recover_exports", "write_models_config"]
