"""Label new texts with a finished run_classifier.py run (its folder, or its model.keras).

Input: a CSV / TSV / JSON lines file with a text column (and a second for pairs; a label column
is not needed), or texts on the command line. Each text is tokenized as the run trained, at its
sequence length (the tokenizer and the length are recorded in model.keras). Writes one JSON line a
text, as the run's predictions.jsonl: where it is, its text(s), its label and the class
probabilities; an existing output file is never replaced.

    python examples/classify.py --model runs/sentiment --input_file new.csv --output_file labelled.jsonl
    python examples/classify.py --model runs/sentiment --text "A gorgeous, witty film." --text "Dull."
"""

import json
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.task_data.classification import read_text_examples
from bertlayers.tasks import TextClassifier
from bertlayers.utils.atomic_files import write_text
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--model", required=True, help="a run_classifier.py output folder, or its model.keras")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input_file", help="CSV / TSV / JSON lines of the texts to label")
    source.add_argument("--text", action="append", help="a text to label (repeat for several); printed, not written")
    parser.add_argument("--output_file", help="the JSON lines to write (with --input_file; must not exist)")
    parser.add_argument("--text_a", default="text", help="column of the (first) text")
    parser.add_argument("--text_b", default=None, help="column of the second text, for sentence pairs")
    parser.add_argument("--batch_size", type=flag(POSITIVE_INT), default=32, help="texts a step")
    args = parser.parse_args()
    if args.input_file and not args.output_file:
        parser.error("--input_file needs --output_file (where the labelled texts go)")
    if args.output_file and os.path.exists(args.output_file):
        parser.error(f"--output_file {args.output_file} exists; this script writes a new file")
    path = os.path.join(args.model, "model.keras") if os.path.isdir(args.model) else args.model
    classifier = TextClassifier.load(path)

    if args.text:
        for text, prediction in zip(args.text, classifier.predict(args.text, batch_size=args.batch_size)):
            print(json.dumps({"text": text, **prediction}))
        return
    examples = read_text_examples(args.input_file, args.text_a, args.text_b, require_label=False)
    pairs = [e.text_b for e in examples] if args.text_b else None
    predictions = classifier.predict([e.text_a for e in examples], pairs, batch_size=args.batch_size)
    lines = []
    for example, prediction in zip(examples, predictions):
        texts = {"id": example.where, "text": example.text_a}
        if example.text_b is not None:
            texts["text_b"] = example.text_b
        lines.append(json.dumps({**texts, **prediction}) + "\n")
    write_text(args.output_file, "".join(lines))
    print(f"Labelled {len(lines)} texts of {args.input_file} with {path}: {args.output_file}")


if __name__ == "__main__":
    run_script(main)
