"""bertlayers side by side with keras-hub and Hugging Face transformers, on the same work.

Every (library, work, precision) runs in its own process, one after another, so peak memory is
each run's own and no two runs share the cores. The table gives medians, the ratio to the fastest
peer (above 1: bertlayers is faster), peak RSS, and for pretraining the MFU against a matmul peak
of the same dtype measured in the same process. A peer that is not installed is reported as
skipped. Both TensorFlow libraries run with TensorFlow's oneDNN rewrites on (bertlayers turns them
on where TensorFlow leaves them off: CPUs without AVX-512 VNNI/BF16 or AMX); TF_ENABLE_ONEDNN_OPTS=0
turns them off for both. The work, each library used the way its documentation shows:

  finetune  MiniLM-sized classifier (L6 H384, the real all-MiniLM-L6-v2 weights where the library
            loads them, random otherwise: same arithmetic), the first 2,048 Rotten Tomatoes training
            snippets (--finetune_examples), one epoch at batch 32, AdamW. bertlayers: batches grouped by length and cut to their longest;
            transformers: `Trainer` with `train_sampling_strategy="group_by_length"` and dynamic padding,
            to a multiple of 8 (its docs' setting) and to the longest (one row each; the faster is the peer);
            keras-hub: its preprocessor at sequence length 64 (fits all but 4 of 8,927 snippets).
            Inputs are tokenized before the clock starts, for every library.
  serve     The MiniLM classifier answering real review snippets, text in (tokenization timed):
            batch-1 p50/p99 and batch-32 throughput. bertlayers and keras-hub: their SavedModels
            (exported length 128); transformers: fast tokenizer + model on torch, eager and
            `torch.compile`, and exported to ONNX and run by ONNX Runtime; bertlayers' text
            SavedModel also converted to TFLite (`export_tflite`, tensorflow-text's kernels for the
            tokenizer) and run by its interpreter on every core, in a process of its own. int8 (serve only):
            bertlayers' `precision="int8"` export and TFLite's dynamic-range int8 (XNNPACK),
            keras-hub's model through Keras's `quantize("int8")`, torch's `quantize_dynamic` of the
            Linear layers, ONNX Runtime's `quantize_dynamic` (QInt8 weights). Each bertlayers row
            gets its ratio to the fastest peer; "best of each" sets bertlayers' fastest row, any
            precision, against the fastest peer's.
  mlm_l4    MLM pretraining steps, L4/H512, sequence 128, batch 32, 20 masked positions, AdamW.
  mlm_base  The same at BERT-base size (L12/H768), batch 8.

    python benchmarks/compare.py --torch_python /path/to/venv-with-torch/bin/python
    python benchmarks/compare.py --work finetune --precision float32 --quick   # a smoke run
    python benchmarks/compare.py --rounds 3 ...   # every library 3 times, taking turns: medians and per-round ratios
    python benchmarks/compare.py --table benchmarks/results.json --chart benchmarks/ratios.png   # the ratios drawn

The machine's speed drifts between runs (by a fifth on a shared 2-core machine): with --rounds,
each round runs every library back to back, the ratio is taken within each round, and the table
gives the rounds' median ratio and their range.

The peers: keras-hub comes with keras-nlp; for transformers a CPU torch wheel (a plain
`pip install torch` pulls GBs of CUDA):
    pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
    pip install transformers==5.23.0 accelerate==1.15.0   # accelerate: Trainer needs it
    pip install onnx onnxruntime   # the ONNX Runtime rows (skipped without them)
Results go to runs/benchmarks/compare-<UTC time>.json (or --output; an existing file is refused
unless --overwrite), rewritten after every row so a run cut short keeps what it measured; the
table is printed at the end. benchmarks/results.json is the run benchmarks/README.md shows.
"""

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LIBRARIES = ("bertlayers", "keras_hub", "transformers")
WORKS = ("finetune", "serve", "mlm_l4", "mlm_base")
PRECISIONS = ("float32", "bfloat16", "int8")  # int8: weights, for serving only
MINILM = dict(num_layers=6, hidden_size=384, num_heads=12, intermediate_size=1536)
MLM_SIZES = {
    "mlm_l4": dict(num_layers=4, hidden_size=512, num_heads=8, intermediate_size=2048, batch_size=32),
    "mlm_base": dict(num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072, batch_size=8),
}
MLM_SEQUENCE, MLM_PREDICTIONS, VOCABULARY_SIZE = 128, 20, 30522
FINETUNE_BATCH, FINETUNE_LENGTH, SERVE_LENGTH = 32, 64, 128
WARMUP_STEPS = 4  # steps left out of every timing: tracing, kernel selection, allocator warm-up
# Issue 12's targets for bertlayers over the fastest peer, by the columns `scores` returns.
TARGETS = {"finetune": (1.3,), "serve": (1.3, 1.3), "mlm_l4": (1.15,), "mlm_base": (1.15,)}
RATIO_NAMES = {"serve": ("batch-1 p50", "batch 32")}


# --- what every worker shares (no TensorFlow or torch imports at module level) -------------


def peak_rss_mb():
    """This process's peak resident memory: its own high-water mark (VmHWM). Not getrusage's
    ru_maxrss, which on Linux a child started by exec inherits from the parent it was forked from:
    every worker would report at least the driver's resident memory."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):  # no procfs (not Linux): there ru_maxrss is the process's own
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 2**20)


def steady_rate(step_ends, items_per_step):
    """Items per second over the steps after the warm-up, from each step's end time."""
    timed = step_ends[WARMUP_STEPS:]
    if len(timed) < 2:
        raise ValueError(f"too few steps to time ({len(step_ends)}; the first {WARMUP_STEPS} are warm-up)")
    return items_per_step * (len(timed) - 1) / (timed[-1] - timed[0])


def mlm_flops_per_example(size):
    """Training FLOPs of one sequence: 6 x (encoder weights x tokens + attention products) plus the
    head on the masked positions. The same count for every library, so MFU compares the work."""
    hidden, layers, inter = size["hidden_size"], size["num_layers"], size["intermediate_size"]
    per_token = layers * (4 * hidden * hidden + 2 * hidden * inter)  # Q, K, V, output projections and the FFN
    attention = layers * 2 * MLM_SEQUENCE * MLM_SEQUENCE * hidden  # QK^T and AV
    head = MLM_PREDICTIONS * (hidden * hidden + hidden * VOCABULARY_SIZE)
    return 6 * (per_token * MLM_SEQUENCE + attention + head)


def load_request_latency():
    """`bertlayers.export.serving_latency.request_latency` without importing the package (the
    torch environment has no TensorFlow): the module is stdlib and numpy only."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "serving_latency", os.path.join(REPO, "bertlayers", "export", "serving_latency.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.request_latency


# --- bertlayers and keras-hub (TensorFlow) -------------------------------------------------


def tf_matmul_peak(bfloat16):
    import tensorflow as tf

    dtype = tf.bfloat16 if bfloat16 else tf.float32
    a = tf.cast(tf.random.normal((2048, 2048)), dtype)
    matmul = tf.function(lambda m: tf.matmul(m, m))
    matmul(a).numpy()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        matmul(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * 2048**3 / best


def keras_clock():
    """A Keras callback that records the end time of every training step (`.ends`)."""
    import keras

    class StepClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.ends = []

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append(time.perf_counter())

    return StepClock()


def run_bertlayers(work, precision, data, quick, tflite=False, tflite_file=None):
    if tflite_file:
        return tflite_serving(tflite_file, data, quick)
    import numpy as np

    from bertlayers.convert.loading import load_encoder
    from bertlayers.export import export_for_serving
    from bertlayers.export.serving_latency import serving_latency
    from bertlayers.models import SequenceClassifier
    from bertlayers.tokenizers import model_tokenizer
    from bertlayers.training.length_batching import length_batches
    from bertlayers.training.optimization import create_optimizer

    dtype = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    if work == "finetune":
        packer = model_tokenizer(data["vocabulary"]).packer(FINETUNE_LENGTH)
        x = packer(data["texts"])
        model = SequenceClassifier(load_encoder(data["minilm"], dtype=dtype), 2)
        steps = -(-len(data["texts"]) // FINETUNE_BATCH)
        model.compile(optimizer=create_optimizer(5e-5, steps, steps // 10, weight_decay=0.01))
        clock = keras_clock()
        batches = length_batches(
            x,
            {"logits": np.array(data["labels"])},
            batch_size=FINETUNE_BATCH,
            shuffle=True,
            group_by_length=True,
            seed=0,
        )
        model.fit(batches, epochs=1, callbacks=[clock], verbose=0, shuffle=False)
        return {"examples_per_s": steady_rate(clock.ends, FINETUNE_BATCH)}
    if work == "serve":
        if tflite and precision == "bfloat16":
            return {"skipped": "TFLite runs float32 and dynamic-range int8 here, not bfloat16"}
        model = SequenceClassifier(load_encoder(data["minilm"]), 2)
        with tempfile.TemporaryDirectory() as folder:
            paths = export_for_serving(
                model,
                "bench",
                base_dir=folder,
                vocabulary=data["vocabulary"],
                sequence_length=SERVE_LENGTH,
                truncate=True,
                # TFLite quantizes a float32 SavedModel itself (Keras's int8 products have no TFLite kernel)
                precision="float32" if tflite else precision,
            )
            if tflite:
                from bertlayers.export import export_tflite

                path = export_tflite(
                    paths["bench_text"], os.path.join(folder, "bench_text.tflite"), int8=precision == "int8"
                )
                # Timed in a fresh process: the exporter's runtime (its graphs, its threads) stays out
                # of the timing and of the peak memory, as on a server that only loads the file.
                with open(os.path.join(folder, "data.json"), "w", encoding="utf-8") as f:
                    json.dump(data, f)
                extra = ["--tflite_file", path]
                return run_one(sys.executable, "bertlayers", work, precision, f.name, quick, extra)
            return serving_numbers(serving_latency(paths["bench_text"], data["serve_texts"], **serve_settings(quick)))
    model, x, y, weights = bertlayers_pretrainer(work, dtype)
    return keras_mlm_steps(model, x, y, weights, MLM_SIZES[work], precision, quick)


def tflite_serving(path, data, quick):
    """The text `.tflite` at `path` timed through its signature runner on every core, tokenization
    (tensorflow-text's TFLite kernels) included."""
    import numpy as np

    from bertlayers.export import tflite_interpreter

    runner = tflite_interpreter(path, num_threads=os.cpu_count()).get_signature_runner("serving_default")
    call = lambda batch: runner(text=np.array(batch))  # noqa: E731
    return serving_numbers(load_request_latency()(call, data["serve_texts"], **serve_settings(quick)))


def bertlayers_pretrainer(work, dtype):
    """The compiled `BertPretrainer` of MLM work `work` and its batch: (model, x, y, sample weights)."""
    import numpy as np

    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import BertPretrainer
    from bertlayers.training.optimization import create_optimizer

    size = MLM_SIZES[work]
    encoder = BertEncoder(
        vocabulary_size=VOCABULARY_SIZE,
        max_sequence_length=512,
        dtype=dtype,
        **{k: v for k, v in size.items() if k != "batch_size"},
    )
    model = BertPretrainer(encoder, next_sentence=False)
    model.compile(optimizer=create_optimizer(1e-4, 1000, 100, weight_decay=0.01))
    x, y, weights = mlm_batch(size["batch_size"], np)
    x["masked_positions"] = x.pop("mask_positions")
    return model, x, {"mlm": y}, {"mlm": weights}


def run_keras_hub(work, precision, data, quick):
    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf

    if precision == "bfloat16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=data["vocabulary"], lowercase=True)

    def backbone(size):
        return keras_hub.models.BertBackbone(
            vocabulary_size=VOCABULARY_SIZE,
            num_layers=size["num_layers"],
            num_heads=size["num_heads"],
            hidden_dim=size["hidden_size"],
            intermediate_dim=size["intermediate_size"],
            max_sequence_length=512,
        )

    if work == "finetune":
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=FINETUNE_LENGTH)
        x = {k: v.numpy() for k, v in preprocessor(tf.constant(data["texts"])).items()}
        classifier = keras_hub.models.BertTextClassifier(backbone(MINILM), num_classes=2, preprocessor=None)
        classifier.compile(
            optimizer=keras.optimizers.AdamW(5e-5, weight_decay=0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        clock = keras_clock()
        classifier.fit(x, np.array(data["labels"]), batch_size=FINETUNE_BATCH, epochs=1, callbacks=[clock], verbose=0)
        return {"examples_per_s": steady_rate(clock.ends, FINETUNE_BATCH)}
    if work == "serve":
        from bertlayers.export.serving_latency import serving_latency

        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=SERVE_LENGTH)
        classifier = keras_hub.models.BertTextClassifier(backbone(MINILM), num_classes=2, preprocessor=None)
        if precision == "int8":
            classifier.quantize("int8")  # Keras's own, as keras-hub documents it
        module = tf.Module()
        module.classifier = classifier
        module.preprocessor = preprocessor
        module.serve = tf.function(
            lambda text: {"logits": classifier(preprocessor(text))},
            input_signature=[tf.TensorSpec([None], tf.string, name="text")],
        )
        with tempfile.TemporaryDirectory() as folder:
            tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
            return serving_numbers(serving_latency(folder, data["serve_texts"], **serve_settings(quick)))
    size = MLM_SIZES[work]
    model = keras_hub.models.BertMaskedLM(backbone(size), preprocessor=None)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[],
    )
    x, y, weights = mlm_batch(size["batch_size"], np)
    return keras_mlm_steps(model, x, y, weights, size, precision, quick)


def mlm_batch(batch_size, np):
    """One random MLM batch (the timing does not depend on the values): inputs, masked ids, weights."""
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1000, VOCABULARY_SIZE, (batch_size, MLM_SEQUENCE)).astype("int32"),
        "segment_ids": np.zeros((batch_size, MLM_SEQUENCE), "int32"),
        "padding_mask": np.ones((batch_size, MLM_SEQUENCE), "int32"),
        "mask_positions": np.sort(
            rng.permuted(np.tile(np.arange(1, MLM_SEQUENCE), (batch_size, 1)), axis=1)[:, :MLM_PREDICTIONS], axis=1
        ).astype("int32"),
    }
    return (
        x,
        rng.integers(1000, VOCABULARY_SIZE, (batch_size, MLM_PREDICTIONS)).astype("int32"),
        np.ones((batch_size, MLM_PREDICTIONS), "float32"),
    )


def keras_mlm_steps(model, x, y, weights, size, precision, quick):
    import numpy as np
    import tensorflow as tf

    steps = 8 if quick else 24
    repeat = lambda a: np.concatenate([a] * steps)  # noqa: E731

    clock = keras_clock()
    model.fit(
        tf.nest.map_structure(repeat, x),
        tf.nest.map_structure(repeat, y),
        sample_weight=tf.nest.map_structure(repeat, weights),
        batch_size=size["batch_size"],
        epochs=1,
        callbacks=[clock],
        verbose=0,
        shuffle=False,
    )
    rate = steady_rate(clock.ends, size["batch_size"])
    return {"examples_per_s": rate, "mfu": rate * mlm_flops_per_example(size) / tf_matmul_peak(precision == "bfloat16")}


def serve_settings(quick):
    return {"requests": 40, "rounds": 1} if quick else {"requests": 300, "rounds": 2}


def serving_numbers(latency):
    p50, p99, throughput = latency
    return {"p50_ms": p50, "p99_ms": p99, "batch32_per_s": throughput}


# --- transformers on torch -----------------------------------------------------------------


def run_transformers(work, precision, data, quick, compiled=False, pad_multiple=8, onnx=False):
    import torch
    import transformers

    bfloat16 = precision == "bfloat16"
    if work == "finetune":
        tokenizer = transformers.AutoTokenizer.from_pretrained(data["minilm"])
        model = transformers.AutoModelForSequenceClassification.from_pretrained(data["minilm"], num_labels=2)
        encoded = tokenizer(data["texts"], truncation=True, max_length=FINETUNE_LENGTH)
        rows = [{**{k: encoded[k][i] for k in encoded}, "labels": label} for i, label in enumerate(data["labels"])]
        steps = -(-len(rows) // FINETUNE_BATCH)

        class StepClock(transformers.TrainerCallback):
            def __init__(self):
                self.ends = []

            def on_step_end(self, args, state, control, **kwargs):
                self.ends.append(time.perf_counter())

        clock = StepClock()
        with tempfile.TemporaryDirectory() as folder:
            arguments = transformers.TrainingArguments(
                output_dir=folder,
                per_device_train_batch_size=FINETUNE_BATCH,
                num_train_epochs=1,
                learning_rate=5e-5,
                warmup_steps=steps // 10,
                weight_decay=0.01,
                train_sampling_strategy="group_by_length",
                bf16=bfloat16,
                use_cpu=True,
                report_to="none",
                save_strategy="no",
                logging_strategy="no",
                disable_tqdm=True,
                seed=0,
            )
            trainer = transformers.Trainer(
                model=model,
                args=arguments,
                train_dataset=rows,
                callbacks=[clock],
                data_collator=transformers.DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_multiple),
            )
            trainer.train()
        return {"examples_per_s": steady_rate(clock.ends, FINETUNE_BATCH)}
    if work == "serve":
        tokenizer = transformers.AutoTokenizer.from_pretrained(data["minilm"])
        model = transformers.AutoModelForSequenceClassification.from_pretrained(data["minilm"], num_labels=2).eval()
        if onnx:
            return onnx_runtime_serving(model, tokenizer, precision, data, quick)
        if bfloat16:
            model = model.to(torch.bfloat16)
        if precision == "int8":  # torch's dynamic quantization: int8 Linear weights, activations per batch
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        forward = torch.compile(model, dynamic=True) if compiled else model

        def call(texts):
            with torch.inference_mode():
                batch = tokenizer(texts, padding=True, truncation=True, max_length=SERVE_LENGTH, return_tensors="pt")
                return forward(**batch).logits.float().numpy()

        return serving_numbers(load_request_latency()(call, data["serve_texts"], **serve_settings(quick)))
    import numpy as np

    size = MLM_SIZES[work]
    config = transformers.BertConfig(
        vocab_size=VOCABULARY_SIZE,
        hidden_size=size["hidden_size"],
        num_hidden_layers=size["num_layers"],
        num_attention_heads=size["num_heads"],
        intermediate_size=size["intermediate_size"],
        max_position_embeddings=512,
    )
    model = transformers.BertForMaskedLM(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    x, y, _ = mlm_batch(size["batch_size"], np)
    labels = np.full((size["batch_size"], MLM_SEQUENCE), -100, "int64")
    np.put_along_axis(labels, x["mask_positions"], y, axis=1)
    inputs = {
        "input_ids": torch.tensor(x["token_ids"], dtype=torch.long),
        "attention_mask": torch.ones_like(torch.tensor(x["padding_mask"])),
        "token_type_ids": torch.zeros((size["batch_size"], MLM_SEQUENCE), dtype=torch.long),
        "labels": torch.tensor(labels),
    }
    ends = []
    for _ in range(8 if quick else 24):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
            loss = model(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        ends.append(time.perf_counter())
    rate = steady_rate(ends, size["batch_size"])
    return {"examples_per_s": rate, "mfu": rate * mlm_flops_per_example(size) / torch_matmul_peak(bfloat16)}


def onnx_runtime_serving(model, tokenizer, precision, data, quick):
    """The transformers model exported to ONNX and served by ONNX Runtime, its weights quantized to
    int8 by ONNX Runtime's dynamic quantization for precision "int8" (what sentence-transformers'
    ONNX backend and Optimum do for a CPU)."""
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tokenizer(["a review"], return_tensors="pt")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            model,
            tuple(example[name] for name in names),
            path,
            input_names=names,
            output_names=["logits"],
            dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in names}, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        if precision == "int8":
            quantize_dynamic(path, os.path.join(folder, "int8.onnx"), weight_type=QuantType.QInt8)
            path = os.path.join(folder, "int8.onnx")
        elif precision != "float32":
            return {"skipped": f"ONNX Runtime runs float32 and int8 here, not {precision}"}
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

        def call(texts):
            batch = tokenizer(texts, padding=True, truncation=True, max_length=SERVE_LENGTH, return_tensors="np")
            return session.run(["logits"], {name: np.asarray(batch[name], "int64") for name in names})[0]

        return serving_numbers(load_request_latency()(call, data["serve_texts"], **serve_settings(quick)))


def torch_matmul_peak(bfloat16):
    import torch

    a = torch.randn(2048, 2048, dtype=torch.bfloat16 if bfloat16 else torch.float32)
    torch.matmul(a, a)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        torch.matmul(a, a)
        best = min(best, time.perf_counter() - start)
    return 2 * 2048**3 / best


# --- the driver ---------------------------------------------------------------------------


RUNNERS = {"bertlayers": run_bertlayers, "keras_hub": run_keras_hub, "transformers": run_transformers}


def variants(work):
    """(library, label, extra worker flags): the rows of one work."""
    rows = [
        ("bertlayers", "bertlayers", []),
        *([("bertlayers", "bertlayers (TFLite)", ["--tflite"])] if work == "serve" else []),
        ("keras_hub", "keras-hub", []),
        ("transformers", "transformers (torch eager)", []),
    ]
    if work == "finetune":
        # Hugging Face's docs pad to multiples of 8 (for GPU tensor cores); on a CPU the exact
        # longest may be faster, so transformers runs both and its faster row is the peer.
        rows.append(("transformers", "transformers (pad to longest)", ["--pad_to_longest"]))
    if work == "serve":
        rows.append(("transformers", "transformers (torch.compile)", ["--compiled"]))
        rows.append(("transformers", "ONNX Runtime (from transformers)", ["--onnx"]))
    return rows


def worker(args):
    with open(args.data, encoding="utf-8") as f:
        data = json.load(f)
    kwargs = {"compiled": True} if args.compiled else {}
    if args.onnx:
        kwargs["onnx"] = True
    if args.pad_to_longest:
        kwargs["pad_multiple"] = None
    if args.tflite:
        kwargs["tflite"] = True
    if args.tflite_file:
        kwargs["tflite_file"] = args.tflite_file
    result = RUNNERS[args.library](args.work, args.precision, data, args.quick, **kwargs)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print("RESULT " + json.dumps(result), flush=True)


def write_data(path, quick, finetune_examples):
    from bertlayers.task_data.classification import read_text_examples
    from bertlayers.utils.assets import minilm_path, rotten_tomatoes_snippets

    examples = read_text_examples(os.path.join(REPO, "data", "rotten_tomatoes", "train.csv"))
    examples = examples[: 256 if quick else finetune_examples]
    labels = sorted({e.label for e in examples})
    data = {
        "minilm": minilm_path(),
        "vocabulary": os.path.join(minilm_path(), "vocab.txt"),
        "texts": [e.text_a for e in examples],
        "labels": [labels.index(e.label) for e in examples],
        "serve_texts": [text for text, _ in rotten_tomatoes_snippets()[: 96 if quick else 640]],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return data


def machine():
    from bertlayers.utils.machine import cpu_model

    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = set(next(line for line in f if line.startswith("flags")).split(":")[1].split())
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "amx_bf16": "amx_bf16" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "avx512f": "avx512f" in flags,
        "tf_onednn_opts": onednn_setting(),
    }


def onednn_setting():
    """TensorFlow's oneDNN rewrites for both TensorFlow workers: bertlayers turns them on when it
    loads TensorFlow, and keras-hub gets the same runtime, so a ratio compares the libraries and
    not the flag. TF_ENABLE_ONEDNN_OPTS=0 in the environment turns them off for both."""
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")


def run_one(python, library, work, precision, data_path, quick, extra):
    command = (
        [
            python,
            os.path.abspath(__file__),
            "--worker",
            "--library",
            library,
            "--work",
            work,
            "--precision",
            precision,
            "--data",
            data_path,
        ]
        + (["--quick"] if quick else [])
        + extra
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPO, "TF_ENABLE_ONEDNN_OPTS": onednn_setting()}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"skipped": "failed: " + " | ".join(tail)}
    return json.loads(lines[-1][len("RESULT ") :])


def installed(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def headline(work):
    return {"finetune": "examples/s", "serve": "batch-1 p50 ms", "mlm_l4": "examples/s", "mlm_base": "examples/s"}[work]


def scores(work, result):
    """Higher is better, for the ratios: latency is inverted. Serving has two (p50, batch 32)."""
    if work == "serve":
        return (1 / result["p50_ms"], result["batch32_per_s"])
    return (result["examples_per_s"],)


def median_run(runs):
    """One row of the table from a library's runs of one work: the median of every figure."""
    done = [r for r in runs if "skipped" not in r]
    if not done:
        return runs[0]
    row = dict(done[0])
    for key, value in done[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "round":
            row[key] = statistics.median(r[key] for r in done if key in r)
    row["runs"] = len(done)
    return row


def round_ratios(work, runs, label="bertlayers"):
    """The row `label` of bertlayers (None: its fastest row in each column, whatever the row) over
    the fastest peer of the same round, one tuple of ratios per round: a round runs every library
    back to back, so the machine's drift between rounds cancels out."""
    ratios = []
    for number in sorted({r.get("round", 0) for r in runs}):
        done = [r for r in runs if r.get("round", 0) == number and "skipped" not in r]
        ours = [scores(work, r) for r in done if r["library"] == "bertlayers" and label in (None, r["label"])]
        peers = [scores(work, r) for r in done if r["library"] != "bertlayers"]
        if ours and peers:
            best_ours, best_peer = ([max(column) for column in zip(*rows)] for rows in (ours, peers))
            ratios.append(tuple(o / b for o, b in zip(best_ours, best_peer)))
    return ratios


def shown_ratio(ratios):
    """The median ratio of the rounds, with their range when there were several."""
    parts = []
    for column in zip(*ratios):
        text = f"{statistics.median(column):.2f}x"
        if len(column) > 1:
            text += f" ({min(column):.2f}-{max(column):.2f})"
        parts.append(text)
    return " / ".join(parts)


def table(results):
    lines = [
        "| work | precision | library | result (median of the rounds) | ratio to the fastest peer (serve: p50 / batch 32), median (range) of the rounds | peak RSS MB | MFU |",
        "|---|---|---|---|---|---|---|",
    ]
    for work in WORKS:
        for precision in PRECISIONS:
            runs = [r for r in results if r["work"] == work and r["precision"] == precision]
            if not runs:
                continue
            for label in dict.fromkeys(r["label"] for r in runs):
                r = median_run([run for run in runs if run["label"] == label])
                if "skipped" in r:
                    lines.append(f"| {work} | {precision} | {r['label']} | skipped: {r['skipped'][:80]} | | | |")
                    continue
                if work == "serve":
                    shown = f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, batch 32: {r['batch32_per_s']:.0f}/s"
                else:
                    shown = f"{r['examples_per_s']:.1f} {headline(work)}"
                    if "real_tokens_per_s" in r:
                        shown += f", {r['real_tokens_per_s']:.0f} real tokens/s"
                if r.get("runs", 1) > 1:
                    shown += f" ({r['runs']} runs)"
                ratios = round_ratios(work, runs, label) if r["library"] == "bertlayers" else []
                ratio = shown_ratio(ratios) if ratios else ""
                mfu = f"{r['mfu']:.2f}" if "mfu" in r else ""
                lines.append(
                    f"| {work} | {precision} | {r['label']} | {shown} | {ratio} | {r['peak_rss_mb']:.0f} | {mfu} |"
                )
        runs = [r for r in results if r["work"] == work]
        if len({r["precision"] for r in runs}) > 1 and (ratios := round_ratios(work, runs, None)):
            lines.append(
                f"| {work} | best of each | bertlayers' fastest row against the fastest peer's | | {shown_ratio(ratios)} | | |"
            )
    return "\n".join(lines)


def chart(report, path):
    """A PNG of bertlayers' ratios to the fastest peer: each round's ratio (dots), their median
    (bar), parity (1x) and the target, one row per work, precision and ratio."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--chart needs matplotlib: pip install -e .[charts]") from None
    rows = []  # (label, each round's ratio, target)
    for work in WORKS:
        for precision in PRECISIONS:
            runs = [r for r in report["results"] if r["work"] == work and r["precision"] == precision]
            ours = dict.fromkeys(r["label"] for r in runs if r["library"] == "bertlayers")
            for label in ours:
                shown = "" if label == "bertlayers" else label.removeprefix("bertlayers ") + " "
                for column, rounds in enumerate(zip(*round_ratios(work, runs, label))):
                    names = RATIO_NAMES.get(work, (headline(work),))
                    rows.append((f"{work} {precision} {shown}\n{names[column]}", rounds, TARGETS[work][column]))
    if not rows:
        raise SystemExit("No ratios to draw: the results have no work with bertlayers and a peer in one round.")
    figure, axis = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.6))
    for y, (_, rounds, target) in enumerate(rows):
        median = statistics.median(rounds)
        axis.barh(y, median, color="tab:green" if median >= target else "tab:orange", height=0.55)
        axis.plot(rounds, [y] * len(rounds), "o", color="black", markersize=4)
        axis.plot([target, target], [y - 0.38, y + 0.38], color="tab:red", linewidth=2)
        axis.text(max(max(rounds), target) + 0.03, y, f"{median:.2f}x", va="center")
    axis.axvline(1.0, color="0.4", linestyle="--", linewidth=1)
    axis.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    axis.invert_yaxis()
    axis.set_xlim(0, max(max(max(r), t) for _, r, t in rows) + 0.35)
    axis.set_xlabel("bertlayers / fastest peer (above 1: faster); dots: rounds; red: target")
    machine = report["machine"]
    flags = ", ".join(
        f"{name} {'yes' if machine.get(key) else 'no'}"
        for key, name in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX"))
    )
    axis.set_title(
        f"{machine['cpu']}, {machine['cores']} cores ({flags}), TF_ENABLE_ONEDNN_OPTS={machine.get('tf_onednn_opts')}",
        fontsize=10,
    )
    axis.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    print(f"Chart: {path}")


def write_report(path, report):
    """The report, written atomically (imported here: this module's shared pieces import nothing
    beyond the standard library, so accelerator.py runs where bertlayers is not on the path)."""
    sys.path.insert(0, REPO)
    from bertlayers.utils import atomic_files

    atomic_files.write_json(path, report, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", nargs="+", default=list(WORKS), choices=WORKS)
    parser.add_argument("--precision", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--library", nargs="+", default=list(LIBRARIES), choices=LIBRARIES)
    parser.add_argument("--torch_python", default=sys.executable, help="a Python with torch and transformers")
    parser.add_argument("--finetune_examples", type=int, default=2048, help="training snippets of the fine-tuning work")
    parser.add_argument("--quick", action="store_true", help="a few steps and requests: checks that every row runs")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every library this many times, taking turns; the table gives medians and each round's ratio",
    )
    parser.add_argument(
        "--output", help="where the results go (JSON; default: runs/benchmarks/compare-<UTC time>.json)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument("--table", metavar="RESULTS_JSON", help="print the table of an earlier run and stop")
    parser.add_argument(
        "--chart",
        metavar="PNG",
        help="also draw the ratios (of this run, or of --table's) as a chart (needs matplotlib: the `charts` extra)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pad_to_longest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--onnx", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tflite", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tflite_file", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.table:
        return print_table(args.table, args.chart)
    if args.worker:
        args.library, args.work, args.precision = args.library[0], args.work[0], args.precision[0]
        return worker(args)
    output = args.output or os.path.join(
        "runs", "benchmarks", time.strftime("compare-%Y%m%d-%H%M%S.json", time.gmtime())
    )
    if os.path.exists(output) and not args.overwrite:
        raise FileExistsError(
            f"{output} holds an earlier run's results; pass --overwrite to replace it, or another --output."
        )
    report = {
        "machine": machine(),
        "quick": args.quick,
        "command": " ".join(sys.argv),
        "complete": False,
        "results": [],
    }
    results = report["results"]

    with tempfile.TemporaryDirectory() as folder:
        data_path = os.path.join(folder, "data.json")
        data = write_data(data_path, args.quick, args.finetune_examples)
        mean_real_tokens = None
        for work in args.work:
            for precision in args.precision:
                if precision == "int8" and work != "serve":
                    continue  # int8 weights are a serving precision: no library trains in them
                for number, (library, label, extra) in itertools.product(range(args.rounds), variants(work)):
                    if library not in args.library:
                        continue
                    python = args.torch_python if library == "transformers" else sys.executable
                    module = (
                        "onnxruntime" if "--onnx" in extra else "transformers" if library == "transformers" else library
                    )
                    started = time.perf_counter()
                    result = (
                        run_one(python, library, work, precision, data_path, args.quick, extra)
                        if installed(python, module)
                        else {"skipped": f"{module} is not installed in {python}"}
                    )
                    if work == "finetune" and "examples_per_s" in result:
                        if mean_real_tokens is None:
                            mean_real_tokens = real_tokens_per_example(data)
                        result["real_tokens_per_s"] = result["examples_per_s"] * mean_real_tokens
                    result.update(work=work, precision=precision, library=library, label=label, round=number)
                    results.append(result)
                    write_report(output, report)
                    print(
                        f"{work:9s} {precision:9s} {label:30s} {json.dumps({k: v for k, v in result.items() if k not in ('work', 'precision', 'library', 'label')})} ({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
    report["complete"] = True
    write_report(output, report)
    print(f"\n{report['machine']}\n\n{table(results)}\n\nResults: {output}")
    if args.chart:
        chart(report, args.chart)


def print_table(path, chart_path=None):
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    print(f"{report['machine']}\n{report['command']}\n\n{table(report['results'])}")
    if chart_path:
        chart(report, chart_path)


def real_tokens_per_example(data):
    """Mean WordPiece tokens per training snippet, [CLS] and [SEP] included, at most 64: every
    library trains on all of them once per epoch, so real tokens/s = examples/s x this."""
    from bertlayers.tokenizers import model_tokenizer

    packer = model_tokenizer(data["vocabulary"]).packer(FINETUNE_LENGTH)
    return float(packer(data["texts"])["padding_mask"].sum(axis=1).mean())


if __name__ == "__main__":
    if "--worker" in sys.argv:
        main()  # a worker may run in a Python without TensorFlow (the torch peer's), so no bertlayers here
    else:
        from bertlayers.utils.cli import run_script

        run_script(main)
