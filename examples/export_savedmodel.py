"""Export a saved bertlayers model for TF Serving: NAME (token ids in) and NAME_text (strings in).

    python examples/export_savedmodel.py --model runs/sentiment/model.keras --name sentiment
    python examples/export_savedmodel.py --model runs/pretrain --name tiny_bert     # an encoder
    tensorflow_model_server --rest_api_port=8501 --model_config_file=$PWD/savedmodels/models.local.config
    cd savedmodels && docker compose up            # or TF Serving in Docker (gRPC 8500, REST 8501)
    python examples/export_savedmodel.py ... --tflite    # also NAME.tflite and NAME_text.tflite
    python examples/export_savedmodel.py ... --precision int8 --check_file data/rotten_tomatoes/test.csv

--model takes a .keras file (any model built from the library's layers whose inputs are named
token_ids / segment_ids / padding_mask), a pretrain.py output folder, or a Hugging Face folder.
The text model tokenizes with the tokenizer recorded with the model (the runners and
bertlayers.convert.record_tokenizer record it). Versions are integers, the next free one by default.
"""

import argparse
import os
import tempfile

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.convert import load_encoder, load_model_file, recorded_tokenizer
from bertlayers.export import ExportOptions, check_serving_base, export_for_serving, export_tflite
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.options import add_flags, options_from_flags


def main():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--model",
        required=True,
        help="a .keras model (any model built from the layers), a pretrain.py output folder or a Hugging Face folder",
    )
    parser.add_argument("--name", required=True, help="the model's name in TF Serving (a folder under --base_dir)")
    parser.add_argument("--base_dir", default="savedmodels", help="the TF Serving base folder")
    parser.add_argument(
        "--vocabulary",
        default=None,
        help="vocab.txt for the text model (default: the one recorded with the model; a model without one needs this or --no_text)",
    )
    parser.add_argument("--no_text", action="store_true", help="export the token-ids model only")
    parser.add_argument(
        "--uncased",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="lower-case text first (default: as recorded with the vocabulary, else yes)",
    )
    parser.add_argument(
        "--tflite",
        action="store_true",
        help="also convert each SavedModel to TFLite: <base_dir>/tflite/NAME.tflite (builtin ops; the text "
        "model with tensorflow-text's tokenizer kernels as custom ops; with --precision int8, TFLite's dynamic-range "
        "int8)",
    )
    parser.add_argument(
        "--check_file",
        help="with --precision bfloat16 or int8: a labelled file (a classifier's text,label CSV / TSV / JSONL, a "
        "tagger's CoNLL) scored in float32 and in that precision first; the change is printed (with --tflite, "
        "the ids .tflite file's too)",
    )
    add_flags(parser, ExportOptions, skip=("text",))  # --sequence_length, --truncate, --version, --precision, ...
    args = parser.parse_args()
    check_serving_base(args.base_dir, args.serving_base)  # before the model loads
    if args.check_file and args.precision == "float32":
        parser.error("--check_file compares float32 with the --precision exported (bfloat16 or int8); none is given.")
    model = load_model_file(args.model) if args.model.endswith(".keras") else load_encoder(args.model)
    if args.check_file:
        print(_check_precision(model, args))
    if args.tflite and not args.no_text:  # before anything is written: TFLite runs WordPiece's kernels only
        recorded = recorded_tokenizer(model)
        kind = recorded.in_graph().kind if recorded is not None and not args.vocabulary else "wordpiece"
        if kind != "wordpiece":
            raise ValueError(
                f"--tflite converts a text model whose tokenizer is WordPiece (tensorflow-text's TFLite kernels); "
                f"this {recorded.model_type} model's is {kind}: add --no_text to convert its ids model alone."
            )
    written = export_for_serving(
        model,
        args.name,
        base_dir=args.base_dir,
        vocabulary=args.vocabulary,
        options=ExportOptions(
            **options_from_flags(ExportOptions, args), lowercase=args.uncased, text=not args.no_text, verbose=True
        ),
    )
    for name, path in written.items():
        print(f"{name}: {path}")
    if args.tflite:
        with tempfile.TemporaryDirectory(prefix="tflite_source_") as folder:
            for name, path in _tflite_sources(model, written, args, folder).items():
                lite = os.path.join(args.base_dir, "tflite", name + ".tflite")
                print(f"{name}: {export_tflite(path, lite, int8=args.precision == 'int8')}")
        if args.check_file:  # the ids file, on the task's own tokenization
            print(_check_precision(model, args, tflite=os.path.join(args.base_dir, "tflite", args.name + ".tflite")))
    print(
        f"TF Serving config: {os.path.join(args.base_dir, 'models.config')} (a container mounting {args.base_dir} at "
        f"{args.serving_base}: docker-compose.yml beside it), {os.path.join(args.base_dir, 'models.local.config')} "
        "(a server on this host)"
    )


def _tflite_sources(model, written, args, folder):
    """The SavedModels TFLite converts: those written, or with --precision int8 float32 ones (in
    `folder`) that TFLite quantizes itself, its int8 kernels being its own."""
    if args.precision != "int8":
        return written
    options = {**options_from_flags(ExportOptions, args), "precision": "float32", "version": None}
    return export_for_serving(
        model,
        args.name,
        base_dir=folder,
        vocabulary=args.vocabulary,
        options=ExportOptions(**options, lowercase=args.uncased, text=not args.no_text),
    )


def _check_precision(model, args, tflite=None):
    """One line: the model's score on --check_file in float32 and in --precision (the Keras copy
    export_for_serving serves, or with `tflite` the converted file)."""
    from bertlayers.models import SequenceClassifier, TokenClassifier
    from bertlayers.task_data.classification import read_text_examples
    from bertlayers.task_data.ner import read_conll
    from bertlayers.tasks import TextClassifier, TextTagger
    from bertlayers.tasks.precision_check import precision_check

    if isinstance(model, SequenceClassifier):
        task = TextClassifier(model, args.sequence_length)
        examples = read_text_examples(args.check_file)
        texts, labels = [e.text_a for e in examples], [e.label for e in examples]
    elif isinstance(model, TokenClassifier):
        task = TextTagger(model, args.sequence_length)
        sentences = read_conll(args.check_file)
        texts, labels = [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]
    else:
        raise ValueError(f"--check_file scores a classifier or a tagger; {args.model} holds a {type(model).__name__}.")
    result = precision_check(task, texts, labels, args.precision, tflite=tflite)
    return (
        f"{'TFLite ' if tflite else ''}{args.precision} against float32 on {result['examples']} examples of {args.check_file}: "
        f"{result['metric']} {result['float32']:.2f} -> {result[args.precision]:.2f} ({result['change']:+.2f} points), "
        f"the same answer for {100 * result['same_answers']:.1f}%"
    )


if __name__ == "__main__":
    run_script(main)
