"""The machine a benchmark ran on, for its table's first line."""

import os
import platform


def cpu_name():
    """The CPU's model name (from /proc/cpuinfo where there is one) and its core count."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or 'unknown CPU'}, {os.cpu_count()} cores"
