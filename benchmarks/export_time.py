"""How long `export_for_serving` takes: the first export in a process and the ones after it.

    python benchmarks/export_time.py                 # the real all-MiniLM-L6-v2 classifier, text and ids
    python benchmarks/export_time.py --exports 4 --repeats 2

Each repeat is a new Python (`--repeats`), which builds a two-class classifier over the real
all-MiniLM-L6-v2 and exports it `--exports` times in a row (an ids model and a text model with its
WordPiece tokenizer in the graph, as `TextClassifier.export` writes them). The first export of a
process pays for what later ones find made (TensorFlow's and the library's caches); a user's
export is usually the first of its process. Prints one line a repeat: the seconds of each export.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time


def one_process(exports: int) -> list:
    from bertlayers.convert import load_checkpoint
    from bertlayers.export import export_for_serving
    from bertlayers.models import SequenceClassifier
    from bertlayers.utils.assets import minilm_path

    model = SequenceClassifier(load_checkpoint(minilm_path()).encoder, 2)  # its tokenizer recorded on it
    seconds = []
    with tempfile.TemporaryDirectory() as base:
        for index in range(exports):
            started = time.perf_counter()
            export_for_serving(model, f"classifier{index}", base_dir=base, sequence_length=128)
            seconds.append(round(time.perf_counter() - started, 2))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exports", type=int, default=3, help="exports in a row in each process")
    parser.add_argument("--repeats", type=int, default=2, help="new processes, one after the other")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_process(args.exports)))
        return
    for repeat in range(args.repeats):
        command = [sys.executable, __file__, "--child", "--exports", str(args.exports)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        seconds = json.loads(output.strip().splitlines()[-1])
        print(f"process {repeat + 1}: " + ", ".join(f"{s:.2f} s" for s in seconds) + " (first export, then the others)")


if __name__ == "__main__":
    main()
