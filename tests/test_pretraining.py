"""Pretraining runs: learning, recipes, tf.distribute, and resuming after a real SIGKILL."""

import glob
import json
import os
import shutil
import signal
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from pretraining_fixtures import (
    PREDICTIONS,
    SEQ,
    VOCAB_SIZE,
    common_args,
    history,
    minilm_shaped_folder,
    pretrain_command,
    run_pretrain,
)
from processes import environment, free_ports, jax_processes, run_together, script_result, start

from bertlayers.families.albert import AlbertEncoder
from bertlayers.families.bert import BertEncoder
from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining


def config(corpus, output_dir, **changes):
    values = dict(
        output_dir=str(output_dir),
        vocabulary=corpus["vocabulary"],
        corpus=corpus["corpus"],
        corpus_format="bert",
        sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        batch_size=16,
        num_train_steps=150,
        checkpoint_every=50,
        learning_rate=2e-3,
        dupe_factor=1,
        verbose=0,
    )
    values.update(changes)
    return PretrainingConfig(**values)


def tensorboard_tags(log_dir):
    tags = set()
    for path in glob.glob(os.path.join(log_dir, "**", "events.out.tfevents.*"), recursive=True):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags |= {value.tag for value in event.summary.value}
    return tags


def check_bert_run_learned_and_saved(output_dir, corpus, steps, every):
    """A BERT run's summary, history, TensorBoard logs and saved models: the loss fell from an
    untrained model's, the encoder and the pretrainer (its head tied to the embeddings) load."""
    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["steps"] == steps
    initial, first, last = (summary[k + "_mlm_loss"] for k in ("initial", "first_epoch", "last_epoch"))
    assert abs(initial - np.log(VOCAB_SIZE)) < 0.5  # an untrained model guesses about uniformly
    # As the other recipes' check: 0.5 below a uniform guess (the corpus's pieces' unigram entropy
    # under this 1,000-piece vocabulary is 6.03 against the uniform 6.91: a drop of 1.0 in 60 steps
    # would need more than their frequencies).
    assert last < initial - 0.5 and last < first, (initial, first, last)
    epochs = history(output_dir)
    assert [e["epoch"] for e in epochs] == list(range(steps // every))
    assert "nsp_accuracy" in epochs[-1] and 0 < epochs[0]["learning_rate"]
    encoder = keras.saving.load_model(str(output_dir / "encoder.keras"), safe_mode=True)
    vocabulary_size = sum(1 for _ in open(corpus["vocabulary"], encoding="utf-8"))
    assert isinstance(encoder, BertEncoder) and encoder.config.vocabulary_size == vocabulary_size
    pretrainer = keras.saving.load_model(str(output_dir / "pretrainer.keras"), safe_mode=True)
    assert pretrainer.lm_head.token_embedding is pretrainer.encoder.token_embedding
    tags = tensorboard_tags(str(output_dir / "logs"))
    assert {"epoch_mlm_loss", "epoch_nsp_accuracy", "epoch_learning_rate"} <= tags, tags


@pytest.mark.slow(reason="pretrains each recipe 40 steps until its loss falls")
@pytest.mark.parametrize("recipe, loss", [("albert", "mlm_loss"), ("roberta", "mlm_loss"), ("ltr", "lm_loss")])
def test_other_recipes_learn(corpus, tmp_path, recipe, loss):
    # ALBERT trains its own vocabulary from the corpus; the others use the shared one.
    vocabulary = {"vocabulary": None, "vocabulary_size": 800} if recipe == "albert" else {}
    summary = run_pretraining(
        config(corpus, tmp_path, recipe=recipe, num_train_steps=40, checkpoint_every=20, **vocabulary)
    )
    assert summary["steps"] == 40
    assert summary["last_epoch_" + loss] < summary["initial_" + loss] - 0.5, summary
    encoder = keras.saving.load_model(str(tmp_path / "encoder.keras"), safe_mode=True)
    assert isinstance(encoder, AlbertEncoder if recipe == "albert" else BertEncoder)
    if recipe == "albert":
        trained = open(tmp_path / "vocab.txt", encoding="utf-8").read().split("\n")
        assert trained[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        assert encoder.config.vocabulary_size == len([t for t in trained if t])
    assert encoder.config.causal == (recipe == "ltr")
    spec = json.load(open(tmp_path / "data" / "data_spec.json"))
    assert spec["examples"] == {"albert": "sop", "roberta": "single", "ltr": "single"}[recipe]
    # ALBERT masks statically; RoBERTa masks dynamically and the LM needs no masks.
    assert spec["masking"] == ("token" if recipe == "albert" else None)


def test_bad_settings_are_refused(corpus, tmp_path):
    from bertlayers.training.distribute import build_strategy, compile_options

    with pytest.raises(ValueError, match=r"num_train_steps \(150\) must be a multiple of checkpoint_every \(40\)"):
        config(corpus, tmp_path, checkpoint_every=40)
    with pytest.raises(ValueError, match="Unknown preset 'bert_giant'"):
        config(corpus, tmp_path, preset="bert_giant")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    with pytest.raises(ValueError, match=r"jit_compile \(XLA\) fails under tf.distribute .*keras#19005"):
        compile_options(mirrored, jit_compile=True)
    with pytest.raises(ValueError, match=r"steps_per_execution > 1 fails .*keras#19246"):
        compile_options(mirrored, steps_per_execution=4)
    assert compile_options(tf.distribute.get_strategy(), jit_compile=True, steps_per_execution=4)["jit_compile"]
    os.environ.pop("TF_CONFIG", None)
    with pytest.raises(ValueError, match="needs the TF_CONFIG environment variable"):
        build_strategy("multi_worker")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "data_spec.json").write_text('{"other": 1}')
    with pytest.raises(ValueError, match="holds data made from other inputs"):
        run_pretraining(config(corpus, tmp_path))


@pytest.fixture(scope="module")
def one_device_history(corpus, tmp_path_factory):
    """The history of a TensorFlow run on one device, 24 steps in 6 epochs: what the strategies'
    runs are compared with."""
    output = tmp_path_factory.mktemp("one_device")
    run_pretrain(common_args(corpus, output, 24, 4))
    return history(output)


@pytest.mark.slow(reason="a TensorFlow child with the CPU split in two devices, and a one-device run")
def test_mirrored_strategy_on_two_cpus_matches_one_device(corpus, tmp_path, one_device_history):
    run_pretrain(common_args(corpus, tmp_path / "two", 24, 4, "--strategy", "mirrored", "--num_cpu_devices", "2"))
    one, two = one_device_history, history(tmp_path / "two")
    assert len(one) == len(two) == 6
    for a, b in zip(one, two):
        for key in ("loss", "mlm_loss", "nsp_loss"):
            assert abs(a[key] - b[key]) <= 1e-4, (key, a[key], b[key])


@pytest.mark.slow(reason="two TensorFlow worker children train together; a one-process run beside them")
def test_two_process_multi_worker_training_agrees(corpus, tmp_path, one_device_history):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    args = common_args(corpus, tmp_path / "mw", 24, 4, "--strategy", "multi_worker")
    run_together(
        pretrain_command(args),
        [
            environment(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
            for i in range(2)
        ],
    )
    chief, other = history(tmp_path / "mw"), history(tmp_path / "mw", "history-worker1.json")
    assert len(chief) == len(other) == 6
    for a, b in zip(chief, other):
        assert abs(a["loss"] - b["loss"]) <= 1e-6
    for a, b in zip(one_device_history, chief, strict=True):
        assert abs(a["loss"] - b["loss"]) <= 1e-4, (a["loss"], b["loss"])


@pytest.mark.slow(reason="two JAX children pretrain, are killed and resume; a one-process run beside them")
def test_two_jax_processes_pretrain_as_one_process_and_resume_after_a_kill(corpus, tmp_path):
    """`--strategy multi_worker` under JAX: two processes of 2 host devices each, joined by Keras's
    KERAS_DISTRIBUTION_* variables and each feeding its half of every batch, killed after their
    second backup and started again, log the losses of one process training alone on one device
    without a break; only the chief saves the models."""
    args = common_args(corpus, tmp_path / "two", 24, 4, "--strategy", "multi_worker", "--num_cpu_devices", "2")

    first_port, second_port = free_ports(2)
    kill_after_two_epochs(args, tmp_path / "two", environments=jax_processes(2, first_port))
    outputs = run_together(pretrain_command(args), jax_processes(2, second_port))
    assert "data parallel over 4 JAX devices in 2 processes (this is process 0)" in outputs[0]
    assert "Resuming after step 8" in outputs[0] and "Resuming after step 8" in outputs[1]
    assert "Encoder saved to" in outputs[0] and "Worker 1 done" in outputs[1]
    assert sorted(p.name for p in (tmp_path / "two").glob("*.keras")) == ["encoder.keras", "pretrainer.keras"]
    chief, other = history(tmp_path / "two"), history(tmp_path / "two", "history-worker1.json")
    run_pretrain(common_args(corpus, tmp_path / "one", 24, 4), KERAS_BACKEND="jax")
    alone = history(tmp_path / "one")
    assert len(chief) == len(other) == len(alone) == 6
    assert alone[-1]["loss"] < alone[0]["loss"]  # it trained
    for a, b, c in zip(alone, chief, other):
        for key in ("loss", "mlm_loss", "nsp_loss"):
            assert abs(a[key] - b[key]) <= 1e-5 and abs(b[key] - c[key]) <= 1e-6, (key, a[key], b[key], c[key])


def final_weights(output_dir):
    model = keras.saving.load_model(os.path.join(output_dir, "pretrainer.keras"), safe_mode=True)
    return [np.asarray(w) for w in model.weights]


def recipe_args(corpus, output_dir, steps, every, recipe):
    args = common_args(corpus, output_dir, steps, every, "--recipe", recipe)
    if recipe in ("spanbert", "xlnet"):  # their records carry extra features: made from the corpus
        start = args.index("--input_files")
        args[start : start + 1 + len(corpus["files"])] = [
            "--corpus",
            corpus["corpus"],
            "--corpus_format",
            "bert",
            "--dupe_factor",
            "1",
        ]
    return args


def kill_after_two_epochs(args, output_dir, timeout=240, stage="", environments=(None,)):
    """Start pretrain.py with `args` (one process per environment: the workers of one run),
    SIGKILL them a moment after the run's second backup (between backups, mid-epoch; of the stage
    folder `stage` in a staged run); returns the backup's metadata file."""
    processes = [start(pretrain_command(args), env=env) for env in environments]
    metadata = output_dir / stage / "backup" / "training_metadata.json"
    deadline = time.time() + timeout
    while time.time() < deadline and all(p.poll() is None for p in processes):
        if metadata.exists() and json.loads(metadata.read_text())["epoch"] >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # into the next epoch, between backups
    assert all(p.poll() is None for p in processes), "the run ended before it could be killed"
    for process in processes:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    return metadata


@pytest.mark.slow(reason="each recipe pretrained uninterrupted, killed in a child after two backups, and resumed")
# ELECTRA's joint training resumes in DeBERTa-v3's case (its pretrainer is ELECTRA's, with the
# embeddings shared by gradient-disentangled sharing), and its own stages in the two-stage test below.
# SpanBERT's resume is BERT's (a BertEncoder pretrainer, static masks in its records) over records made
# from the corpus with extra features, which XLNet's case takes.
@pytest.mark.parametrize("recipe, steps", [("bert", 60), ("deberta_v3", 40), ("xlnet", 40)])
def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(corpus, tmp_path, recipe, steps):
    every = 10
    run_pretrain(recipe_args(corpus, tmp_path / "reference", steps, every, recipe))
    if recipe == "bert":  # the uninterrupted run is also the check that BERT's pretraining learns
        check_bert_run_learned_and_saved(tmp_path / "reference", corpus, steps, every)

    killed = tmp_path / "killed"
    args = recipe_args(corpus, killed, steps, every, recipe)
    metadata = kill_after_two_epochs(args, killed)
    killed_at = json.loads(metadata.read_text())["epoch"]
    assert 2 <= killed_at < steps // every
    assert not (killed / "pretrainer.keras").exists()

    output = run_pretrain(args)
    assert f"Resuming after step {killed_at * every}" in output
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["steps"] == steps
    assert [e["epoch"] for e in history(killed)] == list(range(steps // every))
    for resumed, reference in zip(final_weights(killed), final_weights(tmp_path / "reference")):
        np.testing.assert_allclose(resumed, reference, atol=1e-5)


@pytest.mark.slow(reason="two-stage ELECTRA: uninterrupted, killed in a child, resumed")
def test_electra_two_stage_freezes_the_generator_and_resumes_across_stages(corpus, tmp_path):
    """ELECTRA's two-stage training (section 3.2): the generator alone, then a copy of it as the
    discriminator trained with the generator frozen; killed in the second stage, the run resumes
    there and ends where an uninterrupted run does."""
    steps, every = 80, 10
    reference = tmp_path / "reference"
    run_pretrain(recipe_args(corpus, reference, steps, every, "electra") + ["--option", "two_stage=true"])
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["steps"] == steps and set(summary["stages"]) == {"generator", "discriminator"}
    assert [summary["stages"][name]["steps"] for name in ("generator", "discriminator")] == [40, 40]
    generator_stage = keras.saving.load_model(str(reference / "generator" / "pretrainer.keras"), safe_mode=True)
    final = keras.saving.load_model(str(reference / "pretrainer.keras"), safe_mode=True)
    # Frozen as stated: the generator and its head leave the second stage as the first left them,
    # under AdamW's momentum and weight decay (its optimizer never holds them).
    for before, after in zip(
        generator_stage.encoder.weights + generator_stage.generator_head.weights,
        final.generator.weights + final.generator_head.weights,
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before), err_msg=after.path)
    assert not final.generator.trainable_weights and final.generator.embeddings is not final.encoder.embeddings
    # The discriminator started as that generator (the next test checks the copy) and trained on.
    moved = [  # (the pooler is not trained)
        np.abs(np.asarray(d) - np.asarray(g)).max()
        for d, g in zip(final.encoder.weights, generator_stage.encoder.weights, strict=True)
        if not d.path.startswith("pooler/")
    ]
    assert min(moved) > 0, moved
    assert summary["last_epoch_rtd_loss"] < summary["first_epoch_rtd_loss"] - 0.05, summary
    assert summary["initial_mlm_loss"] == summary["stages"]["generator"]["initial_mlm_loss"]
    encoder = keras.saving.load_model(str(reference / "encoder.keras"), safe_mode=True)
    for a, b in zip(encoder.weights, final.encoder.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # The killed run starts with the uninterrupted run's first stage finished (a copy of its folder:
    # the same settings train the same generator), finds it so, and is killed in the second stage.
    killed = tmp_path / "killed"
    shutil.copytree(reference / "generator", killed / "generator")
    args = recipe_args(corpus, killed, steps, every, "electra") + ["--option", "two_stage=true"]
    metadata = kill_after_two_epochs(args, killed, stage="discriminator")
    assert json.loads(metadata.read_text())["epoch"] >= 2
    output = run_pretrain(args)
    assert "Resuming after step" in output
    for resumed, uninterrupted in zip(final_weights(killed), final_weights(reference), strict=True):
        np.testing.assert_allclose(resumed, uninterrupted, atol=1e-5)


@pytest.mark.slow(reason="pretrains ELMo's biLM and measures its held-out perplexity")
def test_elmo_recipe_trains_the_bilm_and_measures_held_out_perplexity(corpus, tmp_path):
    from bertlayers.families.elmo import WordVocabulary

    text = open(corpus["corpus"], encoding="utf-8").read().split("\n\n")
    (tmp_path / "train.txt").write_text("\n\n".join(text[:-2]) + "\n")
    (tmp_path / "heldout.txt").write_text("\n\n".join(text[-2:]) + "\n")
    run_config = dict(
        output_dir=str(tmp_path / "run"),
        recipe="elmo",
        corpus=str(tmp_path / "train.txt"),
        corpus_format="bert",
        eval_corpus=str(tmp_path / "heldout.txt"),
        vocabulary_size=500,
        sequence_length=24,
        batch_size=16,
        num_train_steps=60,
        checkpoint_every=30,
        learning_rate=5e-3,
        options={"units": "64", "projection_units": "32"},
        verbose=0,
    )
    summary = run_pretraining(PretrainingConfig(**run_config))
    words = WordVocabulary.from_file(str(tmp_path / "run" / "words.txt"))
    assert words.size == 500 and words.tokens[:4] == ("<pad>", "<S>", "</S>", "<UNK>") and "the" in words.tokens
    for direction in ("forward", "backward"):
        assert summary[f"last_epoch_{direction}_loss"] < summary[f"first_epoch_{direction}_loss"] - 0.5, summary
    assert abs(summary["initial_forward_loss"] - np.log(500)) < 0.3  # untrained: about uniform
    # Held-out perplexity (exp of the loss) falls with training.
    for direction in ("forward", "backward"):
        assert summary[f"heldout_after_{direction}_loss"] < summary[f"heldout_before_{direction}_loss"] - 0.5, summary
    encoder = keras.saving.load_model(str(tmp_path / "run" / "encoder.keras"), safe_mode=True)
    assert set(encoder.output) == {"layers"} and summary["encoder_parameters"] == encoder.count_params()
    # Finished: started again, nothing trains, and the same steps are reported.
    assert run_pretraining(PretrainingConfig(**run_config))["steps"] == 60
    with pytest.raises(ValueError, match="reads a text corpus"):
        run_pretraining(
            PretrainingConfig(**{**run_config, "output_dir": str(tmp_path / "b"), "input_files": corpus["files"]})
        )
    bad = tmp_path / "words.txt"
    bad.write_text("the\ncat\n")
    with pytest.raises(ValueError, match=r"words.txt: a biLM word list starts with <pad>, <S>, </S>, <UNK>"):
        run_pretraining(
            PretrainingConfig(
                **{**run_config, "output_dir": str(tmp_path / "c"), "vocabulary": str(bad), "vocabulary_size": None}
            )
        )


def test_bilm_batches_are_the_sentences_words_and_characters():
    from bertlayers.families.elmo import WordVocabulary, bilm_words, character_ids, word_batches

    assert bilm_words("Rowling's state-of-the-art (1997) novel, in U.S.") == [
        "Rowling's", "state-of-the-art", "(", "1997", ")", "novel", ",", "in", "U", ".", "S", ".",
    ]  # fmt: skip
    documents = [["The cat sat.", "A dog ran far away"], ["The cat ran."]]
    vocabulary = WordVocabulary(("<pad>", "<S>", "</S>", "<UNK>", "The", "cat", "."))
    data = word_batches(documents, vocabulary, "words.txt", 5, 6, 1, seed=0)
    batch = next(iter(data.dataset))  # one pass: every sentence once
    sentences = sorted(tuple(int(w) for w in row if w) for row in batch["word_ids"].numpy())
    # <S> w1 w2 w3 </S>: sentences cut into pieces of 3 words; words outside the list are <UNK> (3).
    expected = [(1, 4, 5, 3, 2), (1, 6, 2), (1, 3, 3, 3, 2), (1, 3, 3, 2), (1, 4, 5, 3, 2), (1, 6, 2)]
    assert sentences == sorted(expected)
    assert data.num_records == 6 and batch["character_ids"].shape[1:] == (5, 50)
    for row in range(6):
        length = int(batch["padding_mask"][row].numpy().sum())
        assert list(batch["character_ids"][row, 0].numpy()) == character_ids("<S>")
        assert list(batch["character_ids"][row, length - 1].numpy()) == character_ids("</S>")
        assert not batch["character_ids"][row, length:].numpy().any()


def test_electra_two_stage_parts():
    from bertlayers.families.electra import (
        ElectraGeneratorPretrainer,
        ElectraPretrainer,
        electra_embeddings,
        electra_encoder,
        electra_encoders,
        two_stage_discriminator,
    )
    from bertlayers.networks import get_preset

    encoder_config = get_preset("bert_tiny").replace(vocabulary_size=100)
    generator = electra_encoder(encoder_config, electra_embeddings(encoder_config), name="generator")
    stage_one = ElectraGeneratorPretrainer(generator)
    unused = set(map(id, generator.pooler.weights))  # the pooler is not part of pretraining
    assert {id(v) for v in stage_one.trainable_weights} == {id(v) for v in generator.weights} - unused | {
        id(v) for v in stage_one.generator_head.trainable_weights
    }
    discriminator = two_stage_discriminator(generator)
    for d, g in zip(discriminator.weights, generator.weights, strict=True):  # a copy, not a share
        np.testing.assert_array_equal(np.asarray(d), np.asarray(g))
        assert d is not g
    stage_two = ElectraPretrainer(discriminator, generator, train_generator=False)
    frozen = {id(v) for v in generator.weights + stage_two.generator_head.weights}
    trained = {id(v) for v in stage_two.trainable_weights}
    assert not frozen & trained
    assert trained >= {id(v) for v in discriminator.trainable_weights} - set(map(id, discriminator.pooler.weights))
    shared_discriminator, shared_generator = electra_encoders(encoder_config)
    with pytest.raises(ValueError, match="shares its embedding layer, which would freeze with it"):
        ElectraPretrainer(shared_discriminator, shared_generator, train_generator=False)
    with pytest.raises(ValueError, match="Option two_stage of recipe 'electra' must be true or false, got 'maybe'"):
        PretrainingConfig(recipe="electra", options={"two_stage": "maybe"})
    with pytest.raises(ValueError, match="give no generator_fraction"):
        PretrainingConfig(recipe="electra", options={"two_stage": "true", "generator_fraction": "0.5"})
    with pytest.raises(ValueError, match=r"trains in 2 stages \(generator, discriminator\) .* multiple of 2 x"):
        PretrainingConfig(recipe="electra", options={"two_stage": "yes"}, num_train_steps=300, checkpoint_every=100)


def test_mixed_precision_reaches_every_layer_of_the_pretrainer():
    from bertlayers.runs.pretraining import build_pretrainer

    model = build_pretrainer(PretrainingConfig(precision="mixed_bfloat16"), 100)
    computing = [layer for layer in model.encoder.layers if not isinstance(layer, keras.layers.InputLayer)]
    policies = {layer.dtype_policy.name for layer in computing} | {
        model.lm_head.dtype_policy.name,
        model.next_sentence_head.dtype_policy.name,
    }
    assert policies == {"mixed_bfloat16"}, policies


def test_schedule_and_weight_decay_exclusions():
    from bertlayers.training.optimization import WarmupLinearDecay, create_optimizer

    schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
    rates = [float(schedule(step)) for step in (0, 5, 10, 55, 100, 150)]
    np.testing.assert_allclose(rates, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    optimizer = create_optimizer(1e-2, 100, 0, weight_decay=0.1)
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    gamma = keras.Variable(np.ones((2,), "float32"), name="gamma")
    optimizer.apply(
        [np.zeros((2, 2), "float32"), np.zeros(2, "float32"), np.zeros(2, "float32")], [kernel, bias, gamma]
    )
    # Zero gradients: only decoupled weight decay moves a variable, and only the kernel.
    assert np.all(np.asarray(kernel) < 1.0)
    np.testing.assert_array_equal(np.asarray(bias), 1.0)
    np.testing.assert_array_equal(np.asarray(gamma), 1.0)


def _domain_text(tmp_path):
    """Real review snippets, a document a line: training text and held-out text of one domain."""
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    texts = [text for text, _ in rotten_tomatoes_snippets()]
    (tmp_path / "domain.txt").write_text("\n".join(texts[:400]) + "\n", encoding="utf-8")
    (tmp_path / "heldout.txt").write_text("\n".join(texts[400:500]) + "\n", encoding="utf-8")
    return str(tmp_path / "domain.txt"), str(tmp_path / "heldout.txt")


@pytest.mark.slow(reason="continues a checkpoint's pretraining: uninterrupted, killed in a child, resumed")
def test_continued_pretraining_from_a_checkpoint_starts_from_it_learns_and_resumes(tmp_path):
    """`--init FOLDER`: the run's encoder starts as the folder's (outputs equal), its MLM loss on
    held-out text of the domain falls, a run killed mid-way resumes to the same weights, and the
    recipes that cannot start from a checkpoint say so by name."""
    from bertlayers.convert import load_encoder
    from bertlayers.convert.model_files import recorded_tokenizer
    from bertlayers.runs.pretraining import build_pretrainer, initial_weights

    domain, heldout = _domain_text(tmp_path)
    checkpoint = minilm_shaped_folder(str(tmp_path / "checkpoint"))

    def args(output):
        return [
            *("--init", checkpoint, "--recipe", "roberta", "--corpus", domain, "--eval_corpus", heldout),
            *("--output_dir", output, "--num_train_steps", "30", "--checkpoint_every", "5", "--batch_size", "8"),
            *("--sequence_length", "32", "--max_predictions_per_seq", "5", "--learning_rate", "1e-2", "--verbose", "2"),
        ]

    start_config = PretrainingConfig(
        init=checkpoint, recipe="roberta", output_dir=str(tmp_path / "x"), sequence_length=32
    )
    start_weights = initial_weights(checkpoint)
    pretrainer = build_pretrainer(start_config, 30522, start_weights)
    inputs = {"token_ids": np.array([[101, 7592, 2088, 102]]), "segment_ids": np.zeros((1, 4), "int32")}
    inputs["padding_mask"] = np.ones((1, 4), "int32")
    np.testing.assert_allclose(
        pretrainer.encoder(inputs)["sequence_output"], load_encoder(checkpoint)(inputs)["sequence_output"], atol=1e-6
    )

    reference = tmp_path / "reference"
    output = run_pretrain(args(reference))
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["heldout_after_mlm_loss"] < summary["heldout_before_mlm_loss"] - 1.0, summary
    assert f"mlm_loss on {heldout}:" in output
    encoder = keras.saving.load_model(str(reference / "encoder.keras"), safe_mode=True)
    assert recorded_tokenizer(load_encoder(str(reference))).tokens == start_weights.vocabulary.tokens
    assert encoder.config.hidden_size == 32 and encoder.config.num_layers == 1

    killed = tmp_path / "killed"
    kill_after_two_epochs(args(killed), killed)
    assert "Resuming after step" in run_pretrain(args(killed))
    # rtol besides atol: Adam divides a rarely-seen token's tiny gradient by its tiny second
    # moment, so at this rate (1e-2) a rounding difference in it (the resumed process's threads
    # summing in another order) grows to one of the 976,704 values off by 2.2e-5, 3e-4 of itself
    # (on the AVX2 EPYC); a step lost or repeated in the resume moves nearly every value by ~1e-2.
    for resumed, uninterrupted in zip(final_weights(killed), final_weights(reference)):
        np.testing.assert_allclose(resumed, uninterrupted, rtol=1e-3, atol=1e-5)

    for recipe, message in (("electra", "cannot start from a checkpoint"), ("albert", "trains another architecture")):
        refused = script_result("pretrain.py", *args(tmp_path / recipe), "--recipe", recipe, expect=2)
        assert message in refused.stderr, refused.stderr[-2000:]
        assert not (tmp_path / recipe).exists()
