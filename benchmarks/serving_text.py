"""Time text SavedModels answering real review snippets, as TF Serving would run them.

Each model's `serving_default` (a `text` input) answers Rotten Tomatoes snippets in their
natural length mix: batch-1 latency (p50 / p99 over `--requests` requests) and batch-32
throughput. All models run in this one process, one after another, on the same snippets, so
the ratios are comparable; the first model is the baseline of the ratio column. Tokenization
is inside the graph and is timed.

    python examples/demo.py    # exports savedmodels/sentiment (ids in) and savedmodels/sentiment_text (text in)
    python benchmarks/serving_text.py --model savedmodels/sentiment_text/1 [--model OTHER ...]
    python benchmarks/serving_text.py --model savedmodels/sentiment_text/1 --ids_model savedmodels/sentiment/1 \\
        --vocabulary $MINILM/vocab.txt    # the same model without its in-graph tokenization
    python benchmarks/serving_text.py --model savedmodels/sentiment_text/1 --ids_model savedmodels/sentiment/1 \\
        --vocabulary $MINILM/vocab.txt --pad_multiple 1 8    # cut to the exact longest vs multiples of 8

The demo's sentiment model is fine-tuned from MiniLM: MINILM=$(python -c "from bertlayers.utils.assets
import minilm_path; print(minilm_path())").
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# bertlayers first: it loads TensorFlow with the settings its users get (oneDNN rewrites on).
import bertlayers  # noqa: E402, F401

# isort: split
import tensorflow as tf  # noqa: E402

from bertlayers.export.serving_latency import (  # noqa: E402
    answered_texts,
    load_text_ops,
    request_latency,
    serving_latency,
    serving_signature,
)  # noqa: E402
from bertlayers.utils.cli import argument_parser, run_script  # noqa: E402
from bertlayers.utils.machine import cpu_model  # noqa: E402


def snippets(count):
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    return [text for text, _ in rotten_tomatoes_snippets()[:count]]


def pretokenized_call(path, texts, args, multiple):
    """A text-in call for `request_latency` over an ids SavedModel: every request it will send is
    tokenized and cut to its longest (rounded up to a multiple of `multiple`) before the clock
    starts."""
    from bertlayers.tokenizers import model_tokenizer
    from bertlayers.tokenizers.padding import padded_length

    if not args.vocabulary:
        raise ValueError("--ids_model needs --vocabulary (the model's vocab.txt)")
    signature = serving_signature(path)
    length = signature.structured_input_signature[1]["token_ids"].shape[1] or 128
    packer = model_tokenizer(args.vocabulary).packer(length)
    requests = [[text] for text in texts] + [
        texts[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)
    ]
    prepared = {}
    for batch in requests:
        inputs = packer(batch)
        cut = int(padded_length(int(inputs["padding_mask"].sum(axis=1).max()), length, multiple))
        prepared[tuple(batch)] = {name: tf.constant(value[:, :cut]) for name, value in inputs.items()}
    return lambda batch: signature(**prepared[tuple(batch)])


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--model", action="append", required=True, help="a text SavedModel version folder (repeat)")
    parser.add_argument("--requests", type=int, default=300, help="batch-1 requests timed per model")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the snippets at --batch_size")
    parser.add_argument("--snippets", type=int, default=640)
    parser.add_argument(
        "--ids_model",
        action="append",
        default=[],
        help="an ids SavedModel (repeat), fed the "
        "snippets tokenized beforehand with --vocabulary and cut to each batch's longest: "
        "what the model costs without its in-graph tokenization",
    )
    parser.add_argument("--vocabulary", default=None, help="vocab.txt for --ids_model")
    parser.add_argument(
        "--pad_multiple",
        type=int,
        nargs="+",
        default=[1],
        help="time each --ids_model with "
        "batches cut to their longest rounded up to each of these multiples (the text models: 1)",
    )
    args = parser.parse_args()

    load_text_ops()
    offered = snippets(args.snippets)
    # A model exported without truncation refuses longer requests: every model gets the snippets
    # the first one answers.
    texts = answered_texts(args.model[0], offered)
    if not texts:
        raise ValueError(f"{args.model[0]} refuses every snippet (all longer than its sequence length?)")
    print(
        f"{cpu_model()}, {os.cpu_count()} cores, TensorFlow {tf.__version__}; {len(texts)} Rotten Tomatoes snippets"
        + (
            f" ({len(offered) - len(texts)} longer than {args.model[0]} takes left out)"
            if len(texts) < len(offered)
            else ""
        )
    )
    rows = [(path, *serving_latency(path, texts, args.requests, args.batch_size, args.rounds)) for path in args.model]
    for path in args.ids_model:
        for multiple in args.pad_multiple:
            call = pretokenized_call(path, texts, args, multiple)
            latency = request_latency(call, texts, args.requests, args.batch_size, args.rounds)
            rows.append((f"{path} (ids, padded to a multiple of {multiple})", *latency))
    base = rows[0]
    print(
        f"| model | batch 1 p50 ms | batch 1 p99 ms | batch {args.batch_size} examples/s | p50 speed-up | batch {args.batch_size} speed-up |"
    )
    print("|---|---|---|---|---|---|")
    for path, p50, p99, throughput in rows:
        print(
            f"| {path} | {p50:.2f} | {p99:.2f} | {throughput:.1f} | {base[1] / p50:.2f}x | {throughput / base[3]:.2f}x |"
        )


if __name__ == "__main__":
    run_script(main)
