"""The example scripts behave like command-line tools: `--help` prints usage and does no work,
every option says what it is and shows its default, and a user's mistake is one line, status 2,
with no output folder left behind."""

import argparse
import contextlib
import glob
import io
import os
import re
import runpy
import sys

import pytest
from processes import REPO

EXAMPLES = os.path.join(REPO, "examples")
# The scripts a user runs (`_recorded_help.py` is the module they import to answer --help quickly).
SCRIPTS = sorted(p for p in glob.glob(os.path.join(EXAMPLES, "*.py")) if not os.path.basename(p).startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_every_script_answers_help_without_doing_work(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(EXAMPLES)  # as running the script puts its folder first
    monkeypatch.setenv("BERTLAYERS_LIVE_HELP", "1")  # its own parser, not the recorded text
    monkeypatch.setenv("COLUMNS", "100")  # the width the recordings (examples/usage/) are wrapped at
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    parsers = []
    real_print_help = argparse.ArgumentParser.print_help
    monkeypatch.setattr(
        argparse.ArgumentParser, "print_help", lambda self, *a: (parsers.append(self), real_print_help(self, *a))
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exit:
        runpy.run_path(script, run_name="__main__")  # in this process: TensorFlow is loaded once
    assert exit.value.code == 0
    assert printed.getvalue().startswith("usage: ")
    if script in RECORDED:  # what --help answers before TensorFlow loads is this parser's help
        with open(os.path.join(EXAMPLES, "usage", os.path.basename(script)[: -len(".py")] + ".txt")) as f:
            assert printed.getvalue() == f.read(), "stale: run python examples/_recorded_help.py"
    assert not re.search(r"\(default[^)]*\)\s+\(default", printed.getvalue()), "a default shown twice"
    assert os.listdir(tmp_path) == []  # nothing written
    (parser,) = parsers
    assert parser.allow_abbrev is False  # `--epoch 3` is not taken for `--epochs 3`
    options = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    assert [a.option_strings[0] for a in options if not a.help] == [], "options without help text"
    assert isinstance(parser.formatter_class, type) and issubclass(
        parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter
    )


def test_the_help_recorder_answers_help_without_recording(monkeypatch):
    """`python examples/_recorded_help.py --help` says what it does; it does not record again."""
    recordings = os.path.join(EXAMPLES, "usage")
    before = {n: os.stat(os.path.join(recordings, n)).st_mtime_ns for n in os.listdir(recordings)}
    monkeypatch.setattr(sys, "argv", ["_recorded_help.py", "--help"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exit:
        runpy.run_path(os.path.join(EXAMPLES, "_recorded_help.py"), run_name="__main__")
    assert exit.value.code == 0 and printed.getvalue().startswith("usage: _recorded_help.py [-h]")
    assert {n: os.stat(os.path.join(recordings, n)).st_mtime_ns for n in os.listdir(recordings)} == before


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def bad_inputs(tmp):
    """{script: (arguments holding one user mistake, the output folder it must not leave)}."""
    out = tmp / "out"
    no_label = _write(tmp / "no_label.csv", "text,score\ngood film,1\nbad film,0\n")
    bad_conll = _write(tmp / "bad.conll", "Paris B-LOC\nis\n")
    bad_pairs = _write(tmp / "bad_pairs.jsonl", '{"query": "Where is Paris?"}\n')
    bad_choice = _write(
        tmp / "bad.jsonl", '{"context": "It rained.", "choices": ["It stopped.", "Cats."], "label": 2}\n'
    )
    return {
        "ablation.py": (["--output_dir", out, "--objectives", "no_such_objective"], out),
        "demo.py": (["--workdir", out, "--pretrain_steps", "many"], out),
        "classify.py": (["--model", tmp / "missing.keras", "--text", "A fine film."], None),
        "distill.py": (["--teacher", tmp / "missing.keras", "--output_dir", out], out),
        "elmo.py": (["--output_dir", out, "--rt_dir", tmp / "no_such_folder"], out),
        "encode.py": (["--sequence-length", "1"], None),
        "export_savedmodel.py": (["--model", tmp / "missing.keras", "--name", "m", "--base_dir", out], out),
        "parity_report.py": (["--no_such_option"], None),
        "prepare_datasets.py": (["--output_dir", out, "--seed", "x"], out),
        "probe_layers.py": (["--train_file", tmp / "missing.conll", "--output_dir", out], out),
        "pretrain.py": (
            [
                "--corpus",
                tmp / "missing.txt",
                "--output_dir",
                out,
                "--num_train_steps",
                "10",
                "--checkpoint_every",
                "5",
            ],
            out,
        ),
        "run_classifier.py": (["--train_file", no_label, "--eval_file", no_label, "--output_dir", out], out),
        "run_multiple_choice.py": (["--train_file", bad_choice, "--eval_file", bad_choice, "--output_dir", out], out),
        "run_retrieval.py": (["--train_file", bad_pairs, "--eval_file", bad_pairs, "--output_dir", out], out),
        "run_multi_task.py": (["--classification", f"sentiment={no_label},{no_label}", "--output_dir", out], out),
        "run_ner.py": (["--train_file", bad_conll, "--eval_file", bad_conll, "--output_dir", out], out),
        "run_squad.py": (["--train_file", tmp / "missing.json", "--output_dir", out], out),
        "serving_client.py": (["--rest", "http://127.0.0.1:9", "--name", "m", "--input", "no_equals_sign"], None),
        "serving_requests.py": (["--name", "nothing", "--base_dir", tmp], None),
    }


def test_every_script_has_a_bad_input_case(tmp_path):
    assert sorted(bad_inputs(tmp_path)) == sorted(map(os.path.basename, SCRIPTS))


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_a_user_mistake_is_one_line_with_status_2_and_leaves_no_folder(script, tmp_path, monkeypatch):
    from bertlayers.utils import atomic_files

    arguments, output = bad_inputs(tmp_path)[os.path.basename(script)]
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(EXAMPLES)
    monkeypatch.setattr(sys, "argv", [script, *map(str, arguments)])
    monkeypatch.setattr(atomic_files, "_MADE", [])
    errors = io.StringIO()
    with (
        contextlib.redirect_stderr(errors),
        contextlib.redirect_stdout(io.StringIO()),
        pytest.raises(SystemExit) as exit,
    ):
        runpy.run_path(script, run_name="__main__")
    lines = [line for line in errors.getvalue().splitlines() if line.strip()]
    assert exit.value.code == 2, errors.getvalue()[-2000:]
    assert "Traceback" not in errors.getvalue() and "error:" in lines[-1], errors.getvalue()[-2000:]
    if output is not None:
        assert not output.exists(), os.listdir(output)


def test_the_ablation_hands_each_runner_an_empty_folder(tmp_path, monkeypatch):
    """The runners refuse a folder holding another run's files, so the ablation records a step's
    command beside its folder: the runner finds nothing in it, and a rerun reuses the step."""
    import subprocess

    ablation = runpy.run_path(os.path.join(REPO, "examples", "ablation.py"))
    run_step = ablation["run_step"]
    folder = tmp_path / "row" / "rotten_tomatoes_seed0"
    seen = []

    def fake_run(command, **kwargs):
        seen.append(os.path.exists(folder) and os.listdir(folder))
        os.makedirs(folder)
        (folder / "metrics.json").write_text("{}")
        return subprocess.CompletedProcess(command, 0, stdout="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    done = str(folder / "metrics.json")
    assert run_step(done, "run_classifier.py", "--output_dir", str(folder)) is not None
    assert seen == [False]  # the runner met no folder, so nothing of another run in it
    assert run_step(done, "run_classifier.py", "--output_dir", str(folder)) is None  # reused
    with pytest.raises(SystemExit, match="made by another command"):
        run_step(done, "run_classifier.py", "--output_dir", str(folder), "--epochs", "9")


def test_the_ablation_table_shows_what_its_rows_measured():
    """Replaced-token detection and the encoder's size appear where a row has them; a task that did
    not run has no column; a row without RTD shows a dash there."""
    table = runpy.run_path(os.path.join(REPO, "examples", "ablation.py"))["table"]
    spread = {"mean": 0.75, "min": 0.7, "max": 0.8, "runs": [0.7, 0.75, 0.8]}
    loss = {"name": "mlm_loss", "first_epoch": 8.0, "last_epoch": 6.5}
    results = {
        "deberta_v3": {
            "objective": "GDES",
            "pretraining_loss": loss,
            "replaced_token_detection": {"accuracy": 0.9, "baseline_accuracy": 0.88, "auc": 0.712},
            "encoder_parameters": 4_400_000,
            "rotten_tomatoes_accuracy": spread,
        },
        "roberta": {"objective": "MLM", "pretraining_loss": loss, "rotten_tomatoes_accuracy": spread},
    }
    lines = table(results, [0, 1, 2]).splitlines()
    assert "RTD accuracy" in lines[0] and "SQuAD" not in lines[0] and "of 3 seeds" in lines[0]
    assert lines[2] == "| GDES | 4.40M | mlm_loss 8.00 → 6.50 | 90.0% (88.0%; 0.712) | 75.0 [70.0, 80.0] |"
    assert lines[3] == "| MLM | — | mlm_loss 8.00 → 6.50 | — | 75.0 [70.0, 80.0] |"


@pytest.mark.slow(reason="the parity report loads every family's fixtures")
def test_the_parity_report_runs_through_every_family():
    """The command docs/checkpoints.md gives: every float32 figure it prints within 1e-4."""

    from processes import run_script

    output = run_script("parity_report.py", timeout=600)
    rows = [line for line in output.splitlines() if line.startswith("float32")]
    figures = [float(x) for line in rows for x in re.findall(r"\d\.\d\de[-+]\d\d", line)]
    for family in (
        "albert_classifier",
        "modernbert_classifier",
        "eurobert_untied",
        "nomic_bert",
        "xlnet",
        "deberta_v2",
    ):
        assert any(family in line for line in rows), family
    assert len(figures) >= 60 and max(figures) < 1e-4, output


RECORDED = [p for p in SCRIPTS if "import _recorded_help" in open(p, encoding="utf-8").read()]


@pytest.mark.parametrize("script", RECORDED, ids=os.path.basename)
def test_help_is_answered_before_tensorflow_loads_and_equals_the_parser_s(script):
    """`--help` prints the recorded usage (examples/usage/) without importing TensorFlow (that the
    recording is what the script's own parser prints: test_every_script_answers_help_without_doing_work)."""
    import subprocess

    with open(os.path.join(EXAMPLES, "usage", os.path.basename(script)[: -len(".py")] + ".txt")) as f:
        recorded = f.read()
    quick = subprocess.run(
        [sys.executable, "-X", "importtime", script, "--help"], capture_output=True, text=True, timeout=60
    )
    assert quick.returncode == 0 and quick.stdout == recorded
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in quick.stderr.splitlines() if "|" in line}
    assert not loaded & {"tensorflow", "keras", "bertlayers"}, sorted(loaded & {"tensorflow", "keras", "bertlayers"})


def test_a_scripts_progress_is_printed_once_when_the_root_logger_has_a_handler(monkeypatch):
    """A library that calls `logging.basicConfig` gives the root logger a handler; the scripts'
    progress lines went to it too and each was printed twice ("INFO:bertlayers...: ...")."""
    import logging

    from bertlayers.utils.cli import show_progress

    logger = logging.getLogger("bertlayers")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "level", logger.level)
    root_lines = io.StringIO()
    root_handler = logging.StreamHandler(root_lines)
    logging.getLogger().addHandler(root_handler)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            show_progress()
            logging.getLogger("bertlayers.export.saved_model").info("Writing savedmodels/x/1 ...")
    finally:
        logging.getLogger().removeHandler(root_handler)
    assert printed.getvalue() == "Writing savedmodels/x/1 ...\n" and root_lines.getvalue() == ""
