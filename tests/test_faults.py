"""Faults a run or an export must survive: a full disk, a kill -9 at any moment, a second writer in
the same folder. Each ends with a clear error or with success, the previous good state intact, and
the next run working.

A full disk is made two ways: a write wrapper that raises ENOSPC for chosen files (everywhere),
and a real size-limited tmpfs (where this process may mount one: root on Linux; skipped by name
elsewhere).
"""

import errno
import json
import os
import random
import signal
import time

import keras
import pytest
from pretraining_fixtures import PREDICTIONS, SEQ
from processes import python, run, script, script_result, start

from bertlayers.export import export_for_serving
from bertlayers.families.bert import BertEncoder
from bertlayers.runs.pretraining import PretrainingConfig, run_pretraining
from bertlayers.training.checkpointing import ResumableBackup
from bertlayers.utils import atomic_files
from bertlayers.utils.assets import bert_uncased_vocabulary

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=32
)


def staging_left(folder):
    return [n for _, _, files in os.walk(folder) for n in files if n.startswith(atomic_files.STAGING_PREFIX)]


def full_disk_for(monkeypatch, predicate):
    """Make every atomic write of a path matching `predicate` fail as a full disk would."""
    real = atomic_files._write_synced

    def write(path, data):
        if predicate(path):
            with open(path, "wb") as f:  # part of it lands first, as on a real disk
                f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, data)

    monkeypatch.setattr(atomic_files, "_write_synced", write)


# --- The atomic-files utility ----------------------------------------------------------------


def test_a_full_disk_keeps_the_previous_file_and_leaves_no_staging(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    atomic_files.write_json(str(path), {"version": 1})
    full_disk_for(monkeypatch, lambda p: True)
    with pytest.raises(atomic_files.DiskFullError, match=r"No space left on the device while writing .*state\.json"):
        atomic_files.write_json(str(path), {"version": 2})
    assert json.loads(path.read_text()) == {"version": 1}
    assert os.listdir(tmp_path) == ["state.json"]


def test_cleanup_removes_only_what_dead_writers_left(tmp_path):
    finished = run(python("import os; print(os.getpid())"))
    dead = int(finished.stdout)
    for name in (
        f".partial-{dead}-0123abcd-x.json",
        f".partial-{os.getpid()}-0123abcd-y.json",
        ".partial-mine",
        "model",
    ):
        (tmp_path / name).mkdir()
    assert atomic_files.remove_orphaned_staging(str(tmp_path)) == [f".partial-{dead}-0123abcd-x.json"]
    assert sorted(os.listdir(tmp_path)) == sorted([f".partial-{os.getpid()}-0123abcd-y.json", ".partial-mine", "model"])
    # The next writer of a name clears what a killed writer of that name left (a folder a killed
    # save_huggingface staged), and nothing of other names or live writers.
    for name in (f".partial-{dead}-0123abcd-folder", f".partial-{dead}-0123abcd-my-folder"):
        (tmp_path / name).mkdir()
    with atomic_files.atomic_path(str(tmp_path / "folder")) as staging:
        os.makedirs(staging)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [
            f".partial-{os.getpid()}-0123abcd-y.json",
            ".partial-mine",
            "model",
            "folder",
            f".partial-{dead}-0123abcd-my-folder",
        ]
    )


# --- Pretraining -------------------------------------------------------------------------------


def tiny_run(corpus, output_dir, steps=4):
    return PretrainingConfig(
        output_dir=str(output_dir),
        vocabulary=corpus["vocabulary"],
        input_files=corpus["files"],
        sequence_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        batch_size=4,
        num_train_steps=steps,
        checkpoint_every=1,
        verbose=0,
    )


@pytest.mark.slow(reason="pretraining onto a full disk, then resumed")
def test_pretraining_on_a_full_disk_keeps_its_last_backup_and_resumes(corpus, tmp_path, monkeypatch):
    output = tmp_path / "run"
    full_disk_for(monkeypatch, lambda p: "epoch-000003" in p)
    with pytest.raises(atomic_files.DiskFullError, match=r"while writing .*backup/epoch-000003\.weights\.h5"):
        run_pretraining(tiny_run(corpus, output))
    metadata = ResumableBackup.read_metadata(str(output / "backup"))
    assert {key: metadata[key] for key in ("epoch", "weights")} == {"epoch": 2, "weights": "epoch-000002.weights.h5"}
    assert metadata["random_states"] and all(len(state) == 2 for state in metadata["random_states"])  # dropout's
    assert not staging_left(output) and not (output / "encoder.keras").exists()
    monkeypatch.undo()
    summary = run_pretraining(tiny_run(corpus, output))  # space freed: the same command resumes and ends
    assert summary["steps"] == 4 and ResumableBackup.restored_epoch(str(output / "backup")) == 4
    assert keras.saving.load_model(str(output / "encoder.keras")).config.num_layers == 2


def test_a_second_pretraining_run_in_a_busy_folder_is_refused(corpus, tmp_path):
    output = tmp_path / "run"
    with atomic_files.locked(str(output), "test", lock_name=".run.lock"):  # a run in progress holds it
        with pytest.raises(
            atomic_files.FolderBusyError, match=r"Another process is using .*run \(pretraining run in\)"
        ):
            run_pretraining(tiny_run(corpus, output, steps=1))
    assert run_pretraining(tiny_run(corpus, output, steps=1))["steps"] == 1


# --- Fine-tuning --------------------------------------------------------------------------------


def test_a_second_fine_tuning_run_in_a_busy_folder_is_refused(tmp_path):
    from bertlayers.runs.finetuning_config import FinetuningConfig
    from bertlayers.runs.output_folder import start

    config = FinetuningConfig(output_dir=str(tmp_path / "run"))
    with atomic_files.locked(config.output_dir, "test"):
        with pytest.raises(atomic_files.FolderBusyError, match="fine-tuning run in"):
            start(config)
    start(config)  # free again: this process now holds it
    atomic_files.release(os.path.join(os.path.abspath(config.output_dir), ".lock"))


def classifier_command(tmp_path, output):
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    data = tmp_path / "reviews.csv"
    if not data.exists():
        import csv

        with open(data, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            writer.writerows(rotten_tomatoes_snippets()[:64])
        BertEncoder(**TINY).save(str(tmp_path / "encoder.keras"))
    return script(
        "run_classifier.py",
        "--train_file",
        data,
        "--eval_file",
        data,
        "--init",
        tmp_path / "encoder.keras",
        "--vocabulary",
        bert_uncased_vocabulary(),
        "--output_dir",
        output,
        "--epochs",
        "2",
        "--batch_size",
        "8",
        "--sequence_length",
        "32",
        "--verbose",
        "0",
    )


@pytest.mark.slow(reason="a runner child killed 0.5-10.5 s into its run, then the run again")
def test_fine_tuning_killed_at_random_points_then_run_again(tmp_path):
    output = tmp_path / "classifier"
    command = classifier_command(tmp_path, output)
    rng = random.Random(30)
    for _ in range(1):
        process = start(command)
        time.sleep(rng.uniform(0.5, 10.5))  # a fork of the zygote: TensorFlow loaded already
        process.send_signal(signal.SIGKILL)
        process.wait()
        if (output / "model.keras").exists():  # what a kill leaves is complete or absent
            keras.saving.load_model(str(output / "model.keras"))
    if output.exists() and [name for name in os.listdir(output) if not name.startswith(".")]:
        # Fine-tuning does not resume: the same command is refused by name, the killed run's files kept.
        refused = script_result("run_classifier.py", *command[2:], expect=2)  # the kill was the child's
        assert "holds an interrupted run" in refused.stderr or "holds a finished run" in refused.stderr
    script_result("run_classifier.py", *command[2:], "--overwrite")
    assert json.loads((output / "metrics.json").read_text())["eval_examples"] == 64
    assert keras.saving.load_model(str(output / "model.keras")).num_classes == 2
    assert not staging_left(output)


# --- Export -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_encoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("encoder") / "encoder.keras"
    BertEncoder(**TINY, name="encoder").save(str(path))
    return str(path)


def export_command(saved_encoder, base, name="enc"):
    return python(
        "import keras\nfrom bertlayers.export import export_for_serving\n"
        f"export_for_serving(keras.saving.load_model({saved_encoder!r}), {name!r}, base_dir={str(base)!r}, "
        f"vocabulary={bert_uncased_vocabulary()!r}, sequence_length=16)\n"
    )


def listed_models(base):
    config = (base / "models.config").read_text() if (base / "models.config").exists() else ""
    return [line.split('"')[1] for line in config.splitlines() if line.strip().startswith("name:")]


def complete_versions(folder):
    return sorted(
        n for n in os.listdir(folder) if n.isdigit() and os.path.isfile(os.path.join(folder, n, "saved_model.pb"))
    )


@pytest.mark.slow(reason="two export children at once")
def test_two_exports_into_one_base_at_once_both_land(saved_encoder, tmp_path):
    base = tmp_path / "savedmodels"
    processes = [start(export_command(saved_encoder, base), output=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err[-2000:] for _, err in outputs]
    assert sorted(os.listdir(base / "enc")) == ["1", "2"] and complete_versions(base / "enc_text") == ["1", "2"]
    assert listed_models(base) == ["enc", "enc_text"]


@pytest.mark.slow(reason="export children killed at random points")
def test_exports_killed_at_random_points_leave_only_complete_versions(saved_encoder, tmp_path):
    base = tmp_path / "savedmodels"
    rng = random.Random(31)
    for _ in range(2):
        process = start(export_command(saved_encoder, base))
        time.sleep(rng.uniform(2, 12))  # from loading the model to renaming its versions (TensorFlow loaded)
        process.send_signal(signal.SIGKILL)
        process.wait()
        for name in listed_models(base):  # what models.config names, TF Serving can load
            assert complete_versions(base / name), name
    (base / "stale.partial").mkdir(parents=True)  # a folder that is no model (the kills may have come before any)
    # A journal a kill cut off while it was written (its writer, the last export killed, is gone).
    (base / f".partial-{process.pid}-0123abcd-.export-journal-0123abcd.json").write_text("")
    written = export_for_serving(
        keras.saving.load_model(saved_encoder),
        "enc",
        base_dir=str(base),
        vocabulary=bert_uncased_vocabulary(),
        sequence_length=16,
    )
    version = os.path.basename(written["enc"])
    assert complete_versions(base / "enc") == complete_versions(base / "enc_text")  # pairs land together
    assert version in complete_versions(base / "enc") and listed_models(base) == ["enc", "enc_text"]
    assert not staging_left(base) and not [n for n in os.listdir(base) if n.startswith(".export-journal")]
    assert (base / "stale.partial").is_dir()  # not the library's: left alone, and not listed


# --- A real full disk -------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """Mounts a 1 MB tmpfs at a new folder on each call (remountable larger); skipped where
    mounting is not allowed."""
    mounts = []

    def mount(name):
        folder = tmp_path / name
        folder.mkdir()
        command = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)]
        if os.geteuid() != 0 or run(command, expect=None).returncode != 0:
            pytest.skip(
                "a real full disk needs a size-limited tmpfs: root and mount(8) (the ENOSPC wrapper tests run anyway)"
            )
        mounts.append(folder)
        return folder

    yield mount
    for folder in mounts:
        run(["umount", "-l", str(folder)], expect=None)


def resize(mount, size):
    run(["mount", "-o", f"remount,size={size}", str(mount)])


@pytest.mark.slow(reason="pretraining children on a real full disk, then exports")
def test_a_real_full_disk_for_pretraining_and_export(corpus, saved_encoder, small_disk):
    disk = small_disk("run_disk")
    output = disk / "run"
    args = [
        "--output_dir",
        str(output),
        "--vocabulary",
        corpus["vocabulary"],
        "--input_files",
        *corpus["files"],
        "--sequence_length",
        str(SEQ),
        "--max_predictions_per_seq",
        str(PREDICTIONS),
        "--batch_size",
        "4",
        "--num_train_steps",
        "2",
        "--checkpoint_every",
        "1",
        "--verbose",
        "0",
    ]
    command = script("pretrain.py", *args)
    # h5py writing a weights file onto a full disk used to crash the interpreter (exit 139).
    failed = run(command, expect=1, timeout=600)
    assert (
        failed.stderr.strip().splitlines()[-1].startswith("error: [Errno 28] No space left on the device while writing")
    )
    assert not staging_left(output)
    resize(disk, "64m")
    script_result("pretrain.py", *args)  # resumed in this process: the crash it guarded against is behind
    assert ResumableBackup.restored_epoch(str(output / "backup")) == 2

    disk = small_disk("export_disk")  # 1 MB: less than the tiny encoder's 2 MB of weights
    base = disk / "savedmodels"
    with pytest.raises(atomic_files.DiskFullError, match="No space left on the device while writing"):
        export_for_serving(
            keras.saving.load_model(saved_encoder), "enc", base_dir=str(base), sequence_length=16, text=False
        )
    assert not (base / "enc").exists() and not (base / "models.config").exists() and not staging_left(base)
    resize(disk, "64m")
    written = export_for_serving(
        keras.saving.load_model(saved_encoder), "enc", base_dir=str(base), sequence_length=16, text=False
    )
    assert written["enc"].endswith("enc/1") and listed_models(base) == ["enc"]


@pytest.mark.slow(reason="fits stopped and resumed, and uninterrupted")
def test_a_resumed_fit_draws_the_dropout_masks_of_an_uninterrupted_one(tmp_path):
    """The backup records the dropout layers' random generators (a weights file leaves them out):
    a fit stopped after two epochs and started again ends on the uninterrupted fit's weights."""
    import numpy as np

    from bertlayers.models import SequenceClassifier

    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(5, 50, (16, 8)).astype("int32"), "segment_ids": np.zeros((16, 8), "int32")}
    x["padding_mask"] = np.ones((16, 8), "int32")
    y = rng.integers(0, 2, 16)

    def fit(folder, epochs):
        keras.utils.set_random_seed(3)
        encoder = BertEncoder(
            vocabulary_size=50, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32,
            max_sequence_length=16, dropout=0.5,
        )  # fmt: skip
        model = SequenceClassifier(encoder, 2)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(True))
        model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0, callbacks=[ResumableBackup(folder)])
        return [np.asarray(w) for w in model.weights]

    uninterrupted = fit(str(tmp_path / "one"), 4)
    fit(str(tmp_path / "two"), 2)
    resumed = fit(str(tmp_path / "two"), 4)
    for a, b in zip(resumed, uninterrupted):
        np.testing.assert_allclose(a, b, atol=1e-6)
