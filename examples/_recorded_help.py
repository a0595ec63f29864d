"""`--help` without loading TensorFlow: the example scripts' usage, recorded in `examples/usage/`.

A script's flags are made from the library's config classes, and importing the library loads
TensorFlow (3 to 5 s). Imported first by each script that imports the library, this module answers
`-h` / `--help` from the recorded text and exits before that happens. `tests/test_scripts.py` checks
every recording equals the help the script's own parser prints; after changing a flag, record again:

    python examples/_recorded_help.py          # every script's, at 100 columns

`BERTLAYERS_LIVE_HELP=1` makes a script build its parser and print its help itself.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
USAGE = os.path.join(HERE, "usage")
WIDTH = "100"  # the columns the recordings are wrapped at (argparse reads COLUMNS)


def recording(script):
    """The recorded usage file of `script` (a path or a name)."""
    return os.path.join(USAGE, os.path.basename(script)[: -len(".py")] + ".txt")


def answer_help(script, arguments):
    """Print `script`'s recorded usage and exit 0 if `arguments` ask for help."""
    if os.environ.get("BERTLAYERS_LIVE_HELP") == "1" or not {"-h", "--help"} & set(arguments):
        return
    path = recording(script)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            sys.stdout.write(f.read())
        sys.stdout.flush()
        raise SystemExit(0)


def live_help(script):
    """What `script --help` prints from its own parser, at the recordings' width."""
    environment = dict(os.environ, BERTLAYERS_LIVE_HELP="1", COLUMNS=WIDTH, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, env=environment, check=True
    )
    return done.stdout


def record_all():
    """Record every script's usage; each file is replaced whole (written beside, then renamed), so a
    run killed midway leaves the previous recordings, never an empty one."""
    os.makedirs(USAGE, exist_ok=True)
    for name in sorted(os.listdir(HERE)):
        path = os.path.join(HERE, name)
        if name.endswith(".py") and not name.startswith("_") and "import _recorded_help" in open(path).read():
            text = live_help(path)
            staging = f"{recording(path)}.partial-{os.getpid()}"
            with open(staging, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(staging, recording(path))
            print(f"recorded {recording(path)}")


if __name__ == "__main__":
    import argparse

    # It takes no flags: --help says what it does instead of recording.
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    ).parse_args()
    record_all()
elif sys.argv and sys.argv[0].endswith(".py"):
    answer_help(sys.argv[0], sys.argv[1:])
