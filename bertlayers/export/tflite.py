"""TensorFlow Lite: an exported SavedModel (ids in, or text in) converted for on-device use.

The ids model converts to TFLite's builtin ops alone. The text model's tokenizer stays in the
graph as tensorflow-text's TFLite kernels (FastBertNormalize, FastWordpieceTokenize), custom ops
an app registers with tensorflow-text's `tflite_registrar` (`tflite_interpreter` does it here);
the byte-level BPE and SentencePiece text models use ops TFLite lacks and are not converted.
"""

import os
from collections.abc import Callable

from bertlayers.startup import require_tensorflow
from bertlayers.utils import atomic_files

tf = require_tensorflow(__name__)


def export_tflite(saved_model: str, path: str, signature: str = "serving_default", int8: bool = False) -> str:
    """Convert `signature` of the SavedModel version folder `saved_model` to a `.tflite` file at
    `path` (written atomically). Returns `path`.

    float32, or with `int8` TFLite's dynamic-range quantization: the weights of its matrix
    products stored in int8 (a quarter of the size), the activations quantized a row at run time
    by XNNPACK's int8 kernels. Convert a float32 SavedModel: the int8 one of
    `export_for_serving(precision="int8")` holds Keras's int8 products, which TFLite has no kernel for.

    Raises a ValueError naming the ops TFLite cannot run when the graph holds any (those of
    tensorflow-text's WordPiece tokenizer are allowed as custom ops).
    """
    if not os.path.isfile(os.path.join(saved_model, "saved_model.pb")):
        raise FileNotFoundError(f"No SavedModel at {saved_model}.")
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model, signature_keys=[signature])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's tokenizer kernels, registered by the app
    if int8:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic range: int8 weights, float activations
    try:
        model = converter.convert()
    except Exception as error:  # the converter's errors name the ops it could not convert
        raise ValueError(f"{saved_model} does not convert to TFLite: {str(error).strip().splitlines()[-1]}") from None
    unsupported = sorted(set(custom_ops(model)) - TEXT_OPS)
    if unsupported:
        raise ValueError(f"{saved_model} uses ops TFLite has no kernel for: {', '.join(unsupported)}.")
    with atomic_files.atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            f.write(model)
    return path


# tensorflow-text's ops with TFLite kernels that the exported WordPiece text models use.
TEXT_OPS = {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"}


def custom_ops(model: bytes) -> list:
    """The custom ops (not TFLite builtins) a `.tflite` model's bytes call, by name."""
    from tensorflow.lite.python import schema_py_generated as schema

    parsed = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    return [
        code.customCode.decode("utf-8")
        for code in parsed.operatorCodes
        if code.builtinCode == schema.BuiltinOperator.CUSTOM and code.customCode
    ]


def tflite_interpreter(path: str, num_threads: int | None = None) -> "tf.lite.Interpreter":
    """A TFLite interpreter for the model at `path`, with tensorflow-text's kernels registered
    (what an app does to run a text model), on `num_threads` threads (default TFLite's);
    `.get_signature_runner()` calls it."""
    import warnings

    from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

    try:
        import tensorflow_text
    except ImportError:
        raise ImportError(
            "Running a TFLite text model needs tensorflow-text's kernels: pip install tensorflow-text"
        ) from None
    with warnings.catch_warnings():  # tf.lite.Interpreter's notice that LiteRT replaces it
        warnings.simplefilter("ignore")
        return InterpreterWithCustomOps(
            model_path=path,
            custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
            num_threads=num_threads,
        )


def tflite_predictor(path: str, batch_size: int = 32, num_threads: int | None = None) -> Callable[[dict], dict]:
    """A function that runs the ids `.tflite` model at `path` on a dict of input arrays `[n, S]`
    (the Keras model's inputs by name) in batches of `batch_size`, returning its outputs by name
    as numpy arrays `[n, ...]`, rows in order: what `predict_by_length` returns for the Keras model."""
    import numpy as np

    runner = tflite_interpreter(path, num_threads=num_threads).get_signature_runner("serving_default")
    expected = runner.get_input_details()

    def predict(x: dict) -> dict:
        missing = sorted(set(expected) - set(x))
        if missing:
            raise ValueError(f"{path} takes {', '.join(sorted(expected))}; the inputs lack {', '.join(missing)}.")
        rows = len(next(iter(x.values())))
        outputs = {}
        for start in range(0, rows, batch_size):
            batch = {
                name: np.asarray(x[name][start : start + batch_size], detail["dtype"])
                for name, detail in expected.items()
            }
            for name, value in runner(**batch).items():
                outputs.setdefault(name, []).append(value)
        return {name: np.concatenate(parts) for name, parts in outputs.items()}

    return predict
