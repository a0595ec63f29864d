"""Train a dual encoder for retrieval (in-batch negatives) and a cross-encoder that re-ranks its top
k; report MRR@10, nDCG@10 and recall@1/10/100 for BM25, a SPLADE model (`--sparse`), a ColBERT
model (`--multi_vector`), the starting
encoder untuned, the trained dual encoder, BM25 and the dual encoder fused (hybrid), and the dual
encoder re-ranked, side by side.
Files are JSON lines of {"query", "passage"}; an evaluation file's distinct passages are the
collection its queries search. `--beir FOLDER` evaluates on a BEIR folder (graded qrels; the
figures equal pytrec_eval's and BEIR's own).

    python examples/prepare_datasets.py      # data/wiki_retrieval (Wikipedia), data/squad_retrieval
    python examples/run_retrieval.py --train_file data/wiki_retrieval/train.jsonl \\
        --eval_file data/wiki_retrieval/dev.jsonl --eval_file data/squad_retrieval/all.jsonl \\
        --output_dir runs/retrieval

Writes metrics.json, TensorBoard logs, dual_encoder/model.keras (exported by
examples/export_savedmodel.py as text in, unit-length embedding out) and reranker/model.keras
(exported as its pair scorer: query and passage in, score out) to --output_dir.
"""

import dataclasses
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.convert import load_encoder, load_model_file
from bertlayers.metrics import ranking_metrics
from bertlayers.models import DualEncoder, MultipleChoice, SentenceEmbedder
from bertlayers.runs.finetuning import finetune
from bertlayers.runs.finetuning_config import (
    add_finetuning_arguments,
    add_pooling_argument,
    encoder_source,
    fixed_length_config,
    pooling_for,
)
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.retrieval import bm25_scores, embedding_scores, hybrid_scores, rerank, reranker_examples
from bertlayers.task_data.multiple_choice import encode_choices
from bertlayers.task_data.retrieval import check_training_pairs, read_beir, read_pairs, retrieval_set
from bertlayers.tasks import TextMultiVectorEncoder, TextReranker, TextSparseEncoder
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import NON_NEGATIVE_INT, POSITIVE_INT, flag


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--train_file", required=True, help="JSON lines of {query, passage} training pairs")
    parser.add_argument("--eval_file", action="append", default=[], help="JSON lines of evaluation pairs (repeatable)")
    parser.add_argument(
        "--beir",
        action="append",
        default=[],
        help="a BEIR folder to evaluate on (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; repeatable)",
    )
    parser.add_argument("--beir_split", default="test", help="the qrels split of the --beir folders")
    parser.add_argument(
        "--sparse",
        default=None,
        help="a SPLADE model (a sentence-transformers SparseEncoder folder, a ...ForMaskedLM folder, or either's "
        "Hub name) evaluated beside the others as it is",
    )
    parser.add_argument(
        "--multi_vector",
        default=None,
        help="a late-interaction (ColBERT) model (a sentence-transformers MultiVectorEncoder folder or its Hub "
        "name) evaluated beside the others as it is",
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on the file's first N pairs"
    )
    parser.add_argument(
        "--query_length", type=flag(POSITIVE_INT), default=64, help="pieces a query (--sequence_length: a passage)"
    )
    parser.add_argument(
        "--symmetric", action="store_true", help="also train each passage to find its query (CLIP's loss)"
    )
    parser.add_argument(
        "--matryoshka_dims",
        type=flag(POSITIVE_INT),
        nargs="+",
        default=None,
        help="train the dual encoder's loss on each of these leading parts of the embedding too (Matryoshka)",
    )
    parser.add_argument(
        "--rerank_top_k",
        type=flag(NON_NEGATIVE_INT),
        default=10,
        help="passages the cross-encoder re-ranks a query (0: no re-ranker)",
    )
    parser.add_argument(
        "--negatives",
        type=flag(POSITIVE_INT),
        default=3,
        help="BM25 hard negatives beside each query's passage in the re-ranker's training",
    )
    parser.add_argument(
        "--max_rerank_train_examples",
        type=flag(POSITIVE_INT),
        default=None,
        help="train the re-ranker on the first N pairs",
    )
    parser.add_argument(
        "--rerank_batch_size",
        type=flag(POSITIVE_INT),
        default=8,
        help="re-ranker training examples a step (each is 1 + --negatives pairs)",
    )
    add_pooling_argument(parser)  # the re-ranker's
    parser.add_argument(
        "--reranker_init",
        default=None,
        help="start the re-ranker from this cross-encoder (a sentence-transformers CrossEncoder folder, a "
        "one-label ...ForSequenceClassification folder, or a Hub name) instead of the run's encoder: the "
        "table shows it untuned and fine-tuned on each training query's passage and its BM25 hard "
        "negatives (binary cross-entropy, as sentence-transformers trains one)",
    )
    parser.add_argument(
        "--first_stage",
        default=None,
        help="a trained DualEncoder .keras file (a run's dual_encoder/model.keras) "
        "to retrieve with instead of training one",
    )
    args = add_finetuning_arguments(
        parser, sequence_length=256, epochs=1, batch_size=32, learning_rate=5e-5
    ).parse_args()
    config = fixed_length_config(parser, args, "retrieval batches are fixed-length (queries and passages apart).")
    strategy = start(config)
    dual = load_model_file(args.first_stage) if args.first_stage else None
    if dual is not None and not isinstance(dual, DualEncoder):
        raise ValueError(f"--first_stage {args.first_stage} holds a {type(dual).__name__}, not a DualEncoder.")

    # Read and checked before any work: a folder of another kind is refused by name.
    cross_encoder = None
    if args.reranker_init:
        length = args.query_length + args.sequence_length
        cross_encoder = TextReranker.from_checkpoint(args.reranker_init, sequence_length=length)

    pairs = read_pairs(args.train_file)[: args.max_train_examples]
    if dual is None:
        check_training_pairs(pairs, args.batch_size, args.train_file)
    if not args.eval_file and not args.beir:
        parser.error("give an evaluation: --eval_file or --beir (or both)")
    evaluations = {
        os.path.basename(os.path.dirname(os.path.abspath(path))) + "/" + os.path.basename(path): retrieval_set(
            read_pairs(path)
        )
        for path in args.eval_file
    }
    for folder in args.beir:
        name = f"{os.path.basename(os.path.normpath(folder))}/{args.beir_split}"
        evaluations[name] = read_beir(folder, args.beir_split)[0]
    query_packer, passage_packer = (
        config.tokenizer.packer(args.query_length),
        config.tokenizer.packer(args.sequence_length),
    )
    pair_packer = config.tokenizer.packer(args.query_length + args.sequence_length)
    print(
        f"{len(pairs)} training pairs; "
        + "; ".join(
            f"{name}: {len(s.queries)} queries over {len(s.passages)} passages" for name, s in evaluations.items()
        )
    )

    results = {name: {} for name in evaluations}

    def report(name, system, scores):
        metrics = ranking_metrics(scores, evaluations[name].relevant, ks=(1, 10, 100))
        results[name][system] = metrics
        print(f"{name}  {system:28s} " + "  ".join(f"{k} {v:.3f}" for k, v in metrics.items()), flush=True)

    lexical = {name: bm25_scores(c.queries, c.passages) for name, c in evaluations.items()}
    for name in evaluations:
        report(name, "bm25", lexical[name])
    if args.sparse:  # its prompts where it has them ("query", "document"), as sentence-transformers encodes
        splade = TextSparseEncoder.from_checkpoint(args.sparse)
        named = lambda kind: kind if kind in splade.prompts else None  # noqa: E731
        for name, collection in evaluations.items():
            queries = splade.encode(collection.queries, prompt_name=named("query"))
            report(name, "splade", splade.similarity(queries, splade.encode(collection.passages, named("document"))))
    if args.multi_vector:  # as it encodes queries and documents: its prompts, query expansion and skiplist
        colbert = TextMultiVectorEncoder.from_checkpoint(args.multi_vector)
        for name, collection in evaluations.items():
            queries = colbert.encode_query(collection.queries)
            report(name, "multi_vector", colbert.similarity(queries, colbert.encode_document(collection.passages)))

    untuned = SentenceEmbedder(load_encoder(encoder_source(config)))
    for name, collection in evaluations.items():
        scores = embedding_scores(
            untuned,
            untuned,
            query_packer,
            passage_packer,
            collection.queries,
            collection.passages,
            verbose=args.verbose,
        )
        report(name, "untuned", scores)

    x = (
        None
        if dual is not None
        else {
            **{"query_" + k: v for k, v in pack_in_chunks(query_packer, [p.query for p in pairs]).items()},
            **{"passage_" + k: v for k, v in pack_in_chunks(passage_packer, [p.passage for p in pairs]).items()},
        }
    )
    if dual is None:
        dual = finetune(
            strategy,
            dataclasses.replace(config, output_dir=os.path.join(config.output_dir, "dual_encoder")),
            lambda encoder: DualEncoder(encoder, symmetric=args.symmetric, matryoshka_dims=args.matryoshka_dims),
            (x, None, None),
        )

    def dual_scores(collection, truncate_dim=None):
        return embedding_scores(
            dual.query_embedder,
            dual.passage_embedder,
            query_packer,
            passage_packer,
            collection.queries,
            collection.passages,
            verbose=args.verbose,
            truncate_dim=truncate_dim,
        )

    first_stage = {}
    for name, collection in evaluations.items():
        first_stage[name] = dual_scores(collection)
        report(name, "dual_encoder", first_stage[name])
        report(name, "hybrid_bm25_dual_encoder", hybrid_scores(lexical[name], first_stage[name]))
        for dim in dual.matryoshka_dims:  # each leading part the model was trained to work alone
            report(name, f"dual_encoder_{dim}d", dual_scores(collection, dim))

    if args.rerank_top_k:
        rerank_pairs = pairs[: args.max_rerank_train_examples]
        train = retrieval_set(rerank_pairs)
        examples = reranker_examples(
            rerank_pairs, bm25_scores(train.queries, train.passages), args.negatives, args.seed
        )
    if args.rerank_top_k and cross_encoder is not None:
        for name, collection in evaluations.items():
            scores = rerank(
                first_stage[name],
                cross_encoder.model,
                cross_encoder.packer,
                collection.queries,
                collection.passages,
                top_k=args.rerank_top_k,
                verbose=args.verbose,
            )
            report(name, f"dual_encoder_cross_encoder_untuned_top{args.rerank_top_k}", scores)
        # Each listwise example's passages as pairs: the query's own labelled 1, its hard negatives 0.
        pointwise = [(e.context, choice, float(i == e.label)) for e in examples for i, choice in enumerate(e.choices)]
        cross_encoder.fit(
            [(query, passage) for query, passage, _ in pointwise],
            [label for _, _, label in pointwise],
            epochs=config.epochs,
            batch_size=args.rerank_batch_size * (1 + args.negatives),
            learning_rate=config.learning_rate,
            seed=config.seed,
            verbose=args.verbose,
        )
        cross_encoder.save(os.path.join(config.output_dir, "reranker", "model.keras"))
        for name, collection in evaluations.items():
            scores = rerank(
                first_stage[name],
                cross_encoder.model,
                cross_encoder.packer,
                collection.queries,
                collection.passages,
                top_k=args.rerank_top_k,
                verbose=args.verbose,
            )
            report(name, f"dual_encoder_cross_encoder_reranked_top{args.rerank_top_k}", scores)
    elif args.rerank_top_k:
        inputs, labels = encode_choices(pair_packer, examples)
        reranker = finetune(
            strategy,
            dataclasses.replace(
                config,
                output_dir=os.path.join(config.output_dir, "reranker"),
                sequence_length=args.query_length + args.sequence_length,
                batch_size=args.rerank_batch_size,
            ),
            lambda encoder: MultipleChoice(encoder, pooling=pooling_for(config, args.pooling)),
            (inputs, {"logits": labels}, None),
        )
        for name, collection in evaluations.items():
            scores = rerank(
                first_stage[name],
                reranker.scorer,
                pair_packer,
                collection.queries,
                collection.passages,
                top_k=args.rerank_top_k,
                verbose=args.verbose,
            )
            report(name, f"dual_encoder_reranked_top{args.rerank_top_k}", scores)

    for name, systems in results.items():  # the systems side by side, a table an evaluation
        columns = list(next(iter(systems.values())))
        print(f"\n{name}\n| system | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
        for system, metrics in systems.items():
            print(f"| {system} | " + " | ".join(f"{metrics[c]:.3f}" for c in columns) + " |")
    write_json(
        os.path.join(config.output_dir, "metrics.json"),
        {
            "results": results,
            "train_pairs": len(pairs),
            "init": "random" if args.random_init else encoder_source(config),
            "eval_sets": {
                name: {"queries": len(s.queries), "passages": len(s.passages)} for name, s in evaluations.items()
            },
        },
    )

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)
