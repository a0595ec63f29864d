"""What the command-line scripts share: faults of the machine reported on one line."""

import sys

from bertlayers.utils.atomic_files import DiskFullError, FolderBusyError


def run_script(main):
    """Run `main()`; a full disk or a folder in use by another run ends the script with one line
    on stderr and exit status 1 (what was written before stays intact), not a traceback."""
    try:
        return main()
    except (DiskFullError, FolderBusyError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
