"""Probe what each layer of a frozen encoder encodes: a logistic regression per hidden state (the
embeddings, then every layer) on each word's first piece, predicting its tag (CoNLL BIO files:
WNUT-2016 entities by default). Writes probe.json, probe.md (the table) and, with matplotlib
installed, probe.png to --output_dir.

    python examples/prepare_datasets.py          # the real WNUT-2016 data, fixed-seed splits
    python examples/probe_layers.py --output_dir runs/probe --seeds 0 1 2          # MiniLM
    python examples/probe_layers.py --init runs/pretrain --output_dir runs/probe_mine
    python examples/probe_layers.py --bilm runs/elmo/bilm --output_dir runs/probe_bilm   # ELMo's biLM
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.convert import load_encoder
from bertlayers.runs.finetuning_config import tokenizer_of_source
from bertlayers.runs.output_folder import take_output_folder
from bertlayers.runs.probing import probe_bilm_layers, probe_layers
from bertlayers.task_data.ner import read_conll, tag_vocabulary
from bertlayers.utils import atomic_files
from bertlayers.utils.assets import minilm_path
from bertlayers.utils.charts import pyplot, save_figure
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import NON_NEGATIVE_FLOAT, NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT, flag


def main():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--init", default=None, help="the encoder: a checkpoint folder, .keras file or run (default: MiniLM)"
    )
    parser.add_argument(
        "--bilm",
        default=None,
        help="probe a biLM instead (examples/pretrain.py --recipe elmo's folder or encoder.keras)",
    )
    parser.add_argument("--train_file", default="data/wnut16/train.conll", help="CoNLL sentences the probes train on")
    parser.add_argument(
        "--eval_file", default="data/wnut16/test.conll", help="CoNLL sentences the probes are scored on"
    )
    parser.add_argument("--output_dir", required=True, help="where probe.json, probe.md and probe.png go")
    parser.add_argument("--sequence_length", type=flag(POSITIVE_INT), default=64, help="pieces per sentence")
    parser.add_argument("--epochs", type=flag(POSITIVE_INT), default=20, help="passes of each probe over the words")
    parser.add_argument("--batch_size", type=flag(POSITIVE_INT), default=256, help="words per probe step")
    parser.add_argument("--learning_rate", type=flag(POSITIVE_FLOAT), default=1e-2, help="the probes' Adam step")
    parser.add_argument("--l2", type=flag(NON_NEGATIVE_FLOAT), default=1e-4, help="λ of the probes' penalty λ·‖W‖²")
    parser.add_argument(
        "--seeds", type=flag(NON_NEGATIVE_INT), nargs="+", default=[0], help="the probes' seeds (one probe each)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier probe run in --output_dir")
    args = parser.parse_args()
    for path in (args.train_file, args.eval_file):
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"No CoNLL file at {path} (python examples/prepare_datasets.py writes WNUT-2016's)."
            )
    train, evaluation = read_conll(args.train_file), read_conll(args.eval_file)
    take_output_folder(args.output_dir, "probe run", overwrite=args.overwrite)
    tags = tag_vocabulary(train)
    settings = dict(
        l2=args.l2, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate, seeds=args.seeds
    )
    if args.bilm:
        if args.init:
            parser.error("give --init (a WordPiece encoder) or --bilm, not both")
        source = os.path.join(args.bilm, "encoder.keras") if os.path.isdir(args.bilm) else args.bilm
        if not os.path.isfile(source):
            raise FileNotFoundError(f"No biLM at {source} (examples/pretrain.py --recipe elmo writes encoder.keras).")
        import keras

        encoder = keras.saving.load_model(source, safe_mode=True)
        print(f"Probing the biLM {source}: {len(train)} training and {len(evaluation)} evaluation sentences")
        results = probe_bilm_layers(encoder, train, evaluation, tags, **settings)
    else:
        source = args.init or minilm_path()
        encoder = load_encoder(source)
        tokenizer = tokenizer_of_source(source).in_graph()
        print(
            f"Probing {encoder.config.num_layers + 1} hidden states of {source}: {len(train)} training and "
            f"{len(evaluation)} evaluation sentences, {len(tags)} tags"
        )
        results = probe_layers(
            encoder, tokenizer, train, evaluation, tags, sequence_length=args.sequence_length, **settings
        )
    table = _table(results)
    atomic_files.write_json(
        os.path.join(args.output_dir, "probe.json"),
        {"encoder": source, "settings": vars(args), "layers": results},
        indent=1,
    )
    atomic_files.write_text(os.path.join(args.output_dir, "probe.md"), table + "\n")
    print(table)
    _chart(results, os.path.join(args.output_dir, "probe.png"))


def _table(results):
    seeds = len(results[0]["accuracy"]["runs"])
    spread = f", mean [min, max] of {seeds} probe seeds" if seeds > 1 else ""
    lines = [
        f"| hidden state | word accuracy{spread} | accuracy on entity words | entity F1 |",
        "|---|---|---|---|",
    ]
    for r in results:
        name = "embeddings" if r["layer"] == 0 else f"layer {r['layer']}"
        cells = [_cell(r["accuracy"], 100, 2), _cell(r["entity_word_accuracy"], 100, 1), _cell(r["entity_f1"], 1, 1)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(f"| (every word the majority tag) | {100 * results[0]['baseline_accuracy']:.2f} | 0.0 | 0.0 |")
    return "\n".join(lines)


def _cell(measure, scale, digits):
    mean = f"{scale * measure['mean']:.{digits}f}"
    if len(measure["runs"]) == 1:
        return mean
    return f"{mean} [{scale * measure['min']:.{digits}f}, {scale * measure['max']:.{digits}f}]"


def _chart(results, path):
    plt = pyplot()
    if plt is None:  # logged: the table is written without its chart
        return
    layers = [r["layer"] for r in results]
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot(layers, [r["entity_f1"]["mean"] for r in results], "o-", label="entity F1")
    axis.plot(
        layers, [100 * r["entity_word_accuracy"]["mean"] for r in results], "s--", label="accuracy on entity words"
    )
    axis.set_xlabel("hidden state (0: embeddings)")
    axis.set_ylabel("%")
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    save_figure(figure, path)
    print(f"Chart: {path}")


if __name__ == "__main__":
    run_script(main)
