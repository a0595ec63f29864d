"""The machine a timing was measured on, for the line above a benchmark's table."""

import os
import platform


def cpu_model() -> str:
    """The CPU's model name (what a timing was measured on)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line for line in f if line.startswith("model name")).split(":", 1)[1].strip()
    except (OSError, StopIteration):
        return platform.machine()


def cpu_name() -> str:
    """The CPU's model name and its core count ("AMD EPYC, 2 cores")."""
    return f"{cpu_model()}, {os.cpu_count()} cores"
