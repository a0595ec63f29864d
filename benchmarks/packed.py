"""Real-length work on the CPU, packed against padded: a ModernBERT-class encoder (the Ettin-17M
sizes, BERT's 30,522-token WordPiece vocabulary, random weights) classifying real Rotten Tomatoes
snippets.

    padded 128:        every batch of 32 padded to 128 tokens (one compiled shape)
    padded to longest: every batch of 32 padded to its longest snippet (a shape per length; the
                       library's default for real-length training and prediction)
    packed:            snippets packed into rows of 256 tokens, up to 32 per row
                       (`bertlayers.networks.packing`; one compiled shape)

Inference over --examples snippets and one epoch of fine-tuning over half as many, each timed after
an untimed pass (tracing); examples per second, the tokens each way computes, and the ratio of
packed to padded. One process, the ways one after another.

    python benchmarks/packed.py                    # the table (about 5 minutes on 2 cores)
    python benchmarks/packed.py --examples 512     # quicker
    python benchmarks/packed.py --chart docs/images/packed.png   # and its chart
"""

import argparse
import time

from bertlayers.utils.machine import cpu_name


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2048, help="snippets for inference (half of them fine-tune)")
    parser.add_argument("--preset", default="ettin_encoder_17m")
    parser.add_argument("--token_budget", type=int, default=256)
    parser.add_argument("--max_sequences", type=int, default=32)
    parser.add_argument("--chart", help="also draw the results as a PNG here (needs matplotlib)")
    args = parser.parse_args(argv)

    import keras
    import numpy as np

    from bertlayers.models import SequenceClassifier
    from bertlayers.networks import build_encoder, get_preset
    from bertlayers.networks.packing import pack_sequences, packed_classifier, packed_labels
    from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()[: args.examples]
    texts = [text for text, _ in snippets]
    labels = np.array([label == "fresh" for _, label in snippets], "int32")
    padded = model_tokenizer(bert_uncased_vocabulary()).packer(128)(texts)
    padded = {key: np.asarray(value, "int32") for key, value in padded.items()}
    lengths = padded["padding_mask"].sum(axis=1)
    config = get_preset(args.preset).replace(vocabulary_size=30522, max_sequence_length=512)
    keras.utils.set_random_seed(0)
    classifier = SequenceClassifier(build_encoder(config), 2, dropout=0.0)
    packed_model = packed_classifier(classifier, args.max_sequences)
    batch = 32

    def by_longest(inputs, order):
        """Batches of 32 in `order`, each cut to its longest row."""
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            longest = int(lengths[rows].max())
            yield {key: value[rows, :longest] for key, value in inputs.items()}, rows

    def timed(run):
        run()  # traces every shape it meets
        started = time.perf_counter()
        run()
        return time.perf_counter() - started

    order = np.arange(len(texts))
    packed, placement = pack_sequences(padded, args.token_budget, args.max_sequences)
    rows = len(packed["token_ids"])
    results = []
    results.append(
        (
            "inference",
            "padded 128",
            len(texts) * 128,
            timed(lambda: classifier.predict(padded, batch_size=batch, verbose=0)),
        )
    )
    results.append(
        (
            "inference",
            "padded to longest",
            sum(int(lengths[r].max()) * len(r) for _, r in by_longest(padded, order)),
            timed(lambda: [classifier.predict_on_batch(x) for x, _ in by_longest(padded, order)]),
        )
    )
    row_batch = max(1, batch * int(lengths.mean()) // args.token_budget)
    results.append(
        (
            "inference",
            f"packed ({rows} rows of {args.token_budget})",
            rows * args.token_budget,
            timed(lambda: packed_model.predict(packed, batch_size=row_batch, verbose=0)),
        )
    )

    half = len(texts) // 2
    train = {key: value[:half] for key, value in padded.items()}
    loss = {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
    classifier.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss)
    results.append(
        (
            "fine-tuning",
            "padded 128",
            half * 128,
            timed(lambda: classifier.fit(train, {"logits": labels[:half]}, batch_size=batch, epochs=1, verbose=0)),
        )
    )
    train_order = np.arange(half)
    results.append(
        (
            "fine-tuning",
            "padded to longest",
            sum(int(lengths[r].max()) * len(r) for _, r in by_longest(train, train_order)),
            timed(
                lambda: [classifier.train_on_batch(x, {"logits": labels[r]}) for x, r in by_longest(train, train_order)]
            ),
        )
    )
    packed_train, train_placement = pack_sequences(train, args.token_budget, args.max_sequences)
    train_rows = len(packed_train["token_ids"])
    y, weights = packed_labels(labels[:half], train_placement, train_rows, args.max_sequences)
    packed_model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss)
    results.append(
        (
            "fine-tuning",
            f"packed ({train_rows} rows of {args.token_budget})",
            train_rows * args.token_budget,
            timed(
                lambda: packed_model.fit(
                    packed_train,
                    {"logits": y},
                    sample_weight={"logits": weights},
                    batch_size=row_batch,
                    epochs=1,
                    verbose=0,
                )
            ),
        )
    )

    print(
        f"CPU: {cpu_name()}; {args.preset} sizes, {len(texts)} Rotten Tomatoes snippets "
        f"({int(lengths.sum())} real tokens, mean {lengths.mean():.1f}), float32, one process.\n"
    )
    print("| work | batches | tokens computed | seconds | examples/s | vs padded 128 |")
    print("|---|---|---|---|---|---|")
    base = {}
    for work, way, tokens, seconds in results:
        count = len(texts) if work == "inference" else half
        speed = count / seconds
        base.setdefault(work, speed)
        print(f"| {work} | {way} | {tokens} | {seconds:.2f} | {speed:.1f} | {speed / base[work]:.2f}x |")
    if args.chart:
        chart(results, {"inference": len(texts), "fine-tuning": half}, args.chart)


def chart(results, counts, path):
    """Examples a second, each way side by side for inference and fine-tuning."""
    from bertlayers.utils.charts import pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return
    works = list(dict.fromkeys(work for work, *_ in results))
    figure, axes = plt.subplots(1, len(works), figsize=(5 * len(works), 3.4), squeeze=False)
    for axis, work in zip(axes[0], works):
        rows = [(way, counts[work] / seconds) for w, way, _, seconds in results if w == work]
        bars = axis.barh([way for way, _ in rows], [speed for _, speed in rows], color="tab:blue")
        axis.bar_label(bars, [f"{speed:.0f}" for _, speed in rows], padding=3, fontsize="small")
        axis.invert_yaxis()
        axis.set_xlabel("examples / s")
        axis.set_title(work)
        axis.grid(axis="x", alpha=0.3)
    figure.suptitle(f"Packed against padded rows ({cpu_name()})", fontsize="medium")
    figure.tight_layout()
    save_figure(figure, path)


if __name__ == "__main__":
    main()
