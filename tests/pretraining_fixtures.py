"""A small real corpus, vocabulary and TFRecords shared by the pretraining tests, and
examples/pretrain.py run in this process (in a child where a strategy needs a fresh TensorFlow)."""

import json
import os

from processes import environment, run, run_script, script

from bertlayers.pretraining_data.corpus import read_wikipedia_dump, wikipedia_excerpt_path
from bertlayers.pretraining_data.mlm_masking import MaskingConfig
from bertlayers.pretraining_data.objectives import write_pretraining_data
from bertlayers.tokenizers.vocabulary import build_wordpiece_vocabulary

SEQ, PREDICTIONS, VOCAB_SIZE = 64, 10, 1000


def make_corpus(directory):
    """The first Wikipedia articles in BERT's format, a 1k WordPiece vocabulary trained on
    them, and static-masked NSP TFRecords."""
    documents = read_wikipedia_dump(wikipedia_excerpt_path())[:12]
    corpus = os.path.join(directory, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in documents) + "\n")
    vocabulary = os.path.join(directory, "vocab.txt")
    build_wordpiece_vocabulary(documents, VOCAB_SIZE, vocabulary)
    stats = write_pretraining_data(
        documents,
        vocabulary,
        os.path.join(directory, "records"),
        sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        masking=MaskingConfig(max_predictions_per_seq=PREDICTIONS),
        dupe_factor=1,
        num_shards=2,
        verbose=False,
    )
    return {"corpus": corpus, "vocabulary": vocabulary, "files": stats.files}


def common_args(corpus, output_dir, steps, every, *extra):
    return [
        "--output_dir",
        str(output_dir),
        "--vocabulary",
        corpus["vocabulary"],
        "--input_files",
        *corpus["files"],
        "--sequence_length",
        str(SEQ),
        "--max_predictions_per_seq",
        str(PREDICTIONS),
        "--batch_size",
        "8",
        "--num_train_steps",
        str(steps),
        "--checkpoint_every",
        str(every),
        "--learning_rate",
        "2e-3",
        "--dropout",
        "0.0",
        "--verbose",
        "2",
        *extra,
    ]


def pretrain_command(args):
    return script("pretrain.py", *args)


def run_pretrain(args, timeout=300, **env):
    """examples/pretrain.py with `args` to its end; its standard output. In this process, but in a
    child where the run needs a fresh TensorFlow (a strategy over split CPUs) or other `env`."""
    if env or "--strategy" in args:
        return run(pretrain_command(args), timeout=timeout, env=environment(**env)).stdout
    return run_script("pretrain.py", *args, timeout=timeout)


def history(output_dir, name="history.json"):
    with open(os.path.join(output_dir, name), encoding="utf-8") as f:
        return json.load(f)


def fine_tune_export_and_serve(init, vocabulary, tmp_path):
    """Fine-tune the encoder of a pretraining run (`init`) on real Rotten Tomatoes reviews with
    examples/run_classifier.py, export it with examples/export_savedmodel.py, and check both
    SavedModels answer in a process without Keras as the Keras model does."""
    import csv

    import keras
    import numpy as np
    from fresh_serving import run_fresh

    from bertlayers.utils.assets import rotten_tomatoes_snippets

    rows = rotten_tomatoes_snippets()[:48]
    data = tmp_path / "reviews.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    out = tmp_path / "classifier"
    run_script(
        "run_classifier.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--init",
        init,
        "--vocabulary",
        vocabulary,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "16",
        "--sequence_length",
        "32",
        "--verbose",
        "0",
    )
    assert json.load(open(out / "metrics.json"))["eval_examples"] == 48
    base = tmp_path / "savedmodels"
    run_script(
        "export_savedmodel.py",
        "--model",
        str(out / "model.keras"),
        "--name",
        "rt",
        "--base_dir",
        str(base),
        "--vocabulary",
        vocabulary,
        "--sequence_length",
        "32",
    )
    model = keras.saving.load_model(str(out / "model.keras"), safe_mode=True)
    assert sorted(model.label_names) == ["fresh", "rotten"]
    texts = np.array(sorted((text for text, _ in rows), key=len)[:3])  # within the exported 32 tokens
    served = run_fresh(str(base / "rt_text" / "1"), "serving_default", {"text": texts}, tmp_path, text=True)
    assert [name.decode() for name in served["label_name"]] == [model.label_names[i] for i in served["label"]]
    request = {
        "token_ids": np.array([[2, 7, 9, 3]], "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    ids = run_fresh(str(base / "rt" / "1"), "serving_default", request, tmp_path, text=False)
    np.testing.assert_allclose(ids["logits"], model.predict(request, verbose=0)["logits"], atol=1e-4)
    return model


def check_run_encoder(output, pretrainer, encoder_class):
    """A pretraining run's `encoder.keras` (what `--init RUN` loads) is an `encoder_class` that
    computes what the run's `pretrainer` encoder computes."""
    import numpy as np

    from bertlayers.convert import load_model_file

    encoder = load_model_file(os.path.join(output, "encoder.keras"))
    assert isinstance(encoder, encoder_class), type(encoder)
    batch = {
        "token_ids": np.array([[2, 40, 41, 42, 3]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.ones((1, 5), "int32"),
    }
    np.testing.assert_allclose(
        np.asarray(encoder(batch)["sequence_output"]),
        np.asarray(pretrainer.encoder(batch)["sequence_output"]),
        atol=1e-5,
    )


def minilm_shaped_folder(folder):
    """A Hugging Face BERT folder as transformers lays it out, with MiniLM's real tokenizer files
    (its vocabulary, lower-casing) and a one-layer, 32-wide encoder: what `--init` and `load_encoder`
    read, at a size that trains and saves in seconds. Returns the folder."""
    import keras

    from bertlayers.convert import save_huggingface
    from bertlayers.convert.model_files import record_tokenizer, tokenizer_of
    from bertlayers.families.bert import BertEncoder
    from bertlayers.utils.assets import minilm_path

    keras.utils.set_random_seed(5)
    encoder = BertEncoder(
        vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
    )
    record_tokenizer(encoder, tokenizer_of(minilm_path()))
    return save_huggingface(encoder, folder)


def tiny_family_run(corpus, tmp_path_factory, recipe, steps=60):
    """(corpus, output folder, summary) of a tiny `recipe` run on the Wikipedia articles
    (`corpus`: the session's `make_corpus`)."""
    from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining

    output = tmp_path_factory.mktemp(recipe)
    config = PretrainingConfig(
        output_dir=str(output),
        recipe=recipe,
        vocabulary=corpus["vocabulary"],
        corpus=corpus["corpus"],
        corpus_format="bert",
        sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        batch_size=16,
        num_train_steps=steps,
        checkpoint_every=steps // 3,
        learning_rate=2e-3,
        dupe_factor=1,
        dropout=0.0,
        verbose=0,
    )
    return corpus, output, run_pretraining(config)
