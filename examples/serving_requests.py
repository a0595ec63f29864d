"""Print a TF Serving REST request (curl) and its response for each signature of exported models.

No TF Serving binary runs here, so the response is computed by calling the SavedModel's
signature with TensorFlow and written in TF Serving's REST row format ({"predictions": [...]});
long arrays are abbreviated. Like a server, this process loads the models with TensorFlow
and tensorflow-text's kernels alone: neither Keras nor bertlayers is imported.

    python examples/serving_requests.py --base_dir savedmodels --name sentiment
    python examples/serving_requests.py --name sentiment --text_only --signature serving_default --text "Loved it."
"""

import argparse
import glob
import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written and every default shown, as bertlayers.utils.cli's (this script
    does not import bertlayers)."""


def load_text_kernels():
    """tensorflow-text's op kernels, as TF Serving links them; its Python package would import Keras."""
    folder = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(folder, "python", "ops", "*.so"))):
        tf.load_op_library(library)


EXAMPLES = {
    "text": ["A gorgeous, witty, seductive movie.", "The plot is paper-thin and the jokes fall flat."],
    "text_a": ["A gorgeous, witty, seductive movie."],
    "text_b": ["I loved it."],
    "question": ["When did the library move?"],
    "context": ["The Scarth public library moved into the old corn exchange in 1988."],
}


def abbreviate(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    array = np.asarray(value)
    if array.dtype.kind == "f":
        array = np.round(array.astype("float64"), 4)
    if array.dtype.kind in "SO":
        return array.astype(str).tolist()
    flat = array.tolist()
    if array.ndim and array.size > 6:
        return f"<{'x'.join(map(str, array.shape))} array: {json.dumps(np.ravel(array)[:3].tolist())[:-1]}, ...]>"
    return flat


def latest(model_dir):
    return os.path.join(model_dir, str(max(int(n) for n in os.listdir(model_dir) if n.isdigit())))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=Help, allow_abbrev=False)
    parser.add_argument(
        "--base_dir", default="savedmodels", help="the TF Serving base folder the models were exported to"
    )
    parser.add_argument("--name", required=True, help="prints NAME and NAME_text")
    parser.add_argument(
        "--ids",
        default="101,1037,9882,1010,25591,1010,28456,3185,1012,102",
        help="token ids for the ids model's request (a review, in bert-base-uncased's ids)",
    )
    parser.add_argument(
        "--text", action="append", help="text(s) for the text signatures (repeatable; none: two reviews)"
    )
    parser.add_argument("--text_only", action="store_true", help="only the NAME_text model")
    parser.add_argument("--signature", default=None, help="only this signature (none: every one)")
    parser.add_argument("--version", type=int, default=None, help="this version of each model (none: the newest)")
    args = parser.parse_args()
    if args.text:
        EXAMPLES["text"] = args.text
    load_text_kernels()
    names = [
        n
        for n in ([] if args.text_only else [args.name]) + [f"{args.name}_text"]
        if os.path.isdir(os.path.join(args.base_dir, n))
    ]
    if not names:
        parser.error(f"no model {args.name!r} under {args.base_dir} (export one with examples/export_savedmodel.py)")
    for name in names:
        folder = os.path.join(args.base_dir, name)
        path = latest(folder) if args.version is None else os.path.join(folder, str(args.version))
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            parser.error(f"no SavedModel at {path}")
        loaded = tf.saved_model.load(path)
        for signature_name, function in loaded.signatures.items():
            if args.signature and signature_name != args.signature:
                continue
            spec = function.structured_input_signature[1]
            if all(s.dtype == tf.string for s in spec.values()):
                columns = {k: EXAMPLES[k] for k in spec}
            else:
                ids = [int(i) for i in args.ids.split(",")]
                length = spec["token_ids"].shape[1] or len(ids)
                token_ids = ids + [0] * (length - len(ids))
                columns = {
                    "token_ids": [token_ids],
                    "segment_ids": [[0] * length],
                    "padding_mask": [[int(i != 0) for i in token_ids]],
                }
                columns = {k: v for k, v in columns.items() if k in spec}
            rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
            try:
                outputs = function(**{k: tf.constant(v, dtype=spec[k].dtype) for k, v in columns.items()})
            except tf.errors.InvalidArgumentError as error:  # the request checks name what is wrong
                parser.exit(2, f"error: {name} refused the request: {error.message.splitlines()[0]}\n")
            predictions = [{k: abbreviate(v.numpy()[i]) for k, v in sorted(outputs.items())} for i in range(len(rows))]
            request = {"signature_name": signature_name, "instances": rows}
            shown = json.dumps(request, separators=(",", ":"))
            print(f"### {name}, signature {signature_name} ({path})\n")
            print(f"curl -s -X POST http://localhost:8501/v1/models/{name}:predict -d '{shown}'\n")
            print(json.dumps({"predictions": predictions}, indent=1, ensure_ascii=False), "\n")
    # TensorFlow imports Keras by itself where it can; what matters is that nothing needs it.
    imported = sorted({m.split(".")[0] for m in sys.modules} & {"keras", "keras_hub", "keras_nlp", "bertlayers"})
    print(
        "(answered by TensorFlow and tensorflow-text's kernels"
        + (f"; {', '.join(imported)} loaded too)" if imported else " alone: no Keras, no bertlayers)")
    )


if __name__ == "__main__":
    main()
