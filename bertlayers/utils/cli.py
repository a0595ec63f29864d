"""What the command-line scripts share: help that shows every default, and errors on one line.

A user's mistake (a missing file, a bad column, row or option) ends a script with one line on
stderr naming the problem and exit status 2, as argparse's own errors do, and the output folder
the run made for itself is removed when it holds nothing yet. A fault of the machine (a full
disk, a folder in use by another run, a read-only or forbidden path) is one line naming the
path and the cause, and exit status 1, and what was written stays for the run to resume. `BERTLAYERS_TRACEBACK=1` shows the traceback instead.
"""

import argparse
import json
import logging
import os
import sys

from bertlayers.utils.atomic_files import DiskFullError, FolderBusyError, remove_new_empty_folders

# What a user's input can raise: unreadable or missing files, values the library refuses (a
# ValueError names the input; JSON and Unicode decoding errors are ValueErrors too).
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, KeyError)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (usage examples keep their lines), and every option's default,
    once: not after a help text that says its default itself."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "(default" in text or (action.default is None and "(none:" in text):
            return text
        return super()._get_help_string(action)


def argument_parser(description, **kwargs):
    """An `argparse.ArgumentParser` whose `--help` shows the script's docstring and every default,
    and which refuses an abbreviated flag (`--epoch 3` is not taken for `--epochs 3`)."""
    kwargs.setdefault("allow_abbrev", False)
    return argparse.ArgumentParser(description=description, formatter_class=HelpFormatter, **kwargs)


def run_script(main):
    """Run `main()`, reporting user errors and machine faults on one line (see the module), and
    the library's progress (its `logging` records of level INFO and above) on stdout."""
    show_progress()
    try:
        return main()
    except (DiskFullError, FolderBusyError) as error:
        _fail(error, 1)
    except USER_ERRORS as error:
        remove_new_empty_folders()
        _fail(error, 2)
    except OSError as error:  # the machine's answer on a path: read-only, permission, no space, ...
        remove_new_empty_folders()
        _fail(error, 1)


def plain_progress(verbose):
    """Keras's progress bar (`verbose` 1, or "auto") redraws one line with escape codes, even
    where the output goes to a file or a pipe: there, one line an epoch (2) instead."""
    if verbose in (1, "auto") and not (sys.stdout.isatty() or "ipykernel" in sys.modules):
        return 2
    return verbose


def show_progress():
    """Send the library's log records (INFO and above) to stdout, one message a line: a script's
    progress. The library itself only logs (`logging.getLogger("bertlayers...")`)."""
    logger = logging.getLogger("bertlayers")
    if not any(getattr(handler, "_bertlayers_progress", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._bertlayers_progress = True
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # Not passed on to the root logger too: a library the script imports may have given that a
    # handler of its own (`logging.basicConfig`), which printed every line again.
    logger.propagate = False


def _fail(error, status):
    if os.environ.get("BERTLAYERS_TRACEBACK") == "1":
        raise error
    message = error.args[0] if isinstance(error, KeyError) and error.args else error
    if isinstance(error, OSError) and error.filename and error.strerror and not isinstance(error, DiskFullError):
        message = f"cannot use {error.filename}: {error.strerror}"
    if isinstance(error, json.JSONDecodeError):
        message = f"not valid JSON: {error}"
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    raise SystemExit(status) from None
