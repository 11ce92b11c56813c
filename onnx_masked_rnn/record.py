"""Measurements recorded as data: the header of every JSON file under ``docs/results/``.

A record is a JSON object: ``kind`` (what was measured), ``date_utc``, ``command`` (the command
line that produced it), ``machine`` (CPU model, cores, platform, the 1-minute load average before
and after the measurement, so a reader sees what else shared the CPU) and ``versions`` (Python and
each package that took part), then the measurement's own fields. ``scripts/generate_docs.py``
writes the documents' tables from these files. It imports only the standard library.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from onnx_masked_rnn._files import write_atomic

__all__ = ["CORE_PACKAGES", "command_line", "finish", "machine", "start", "versions", "write"]

CORE_PACKAGES = ("onnx-masked-rnn", "numpy", "onnx", "onnx-ir", "onnxruntime", "onnxscript")
"""The packages every measurement of this package depends on."""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def machine() -> dict[str, Any]:
    """The machine's CPU model, core count and platform, and its load average now."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_before": load_average(),
    }


def versions(packages: Sequence[str] = ()) -> dict[str, str | None]:
    """Python's version and each of :data:`CORE_PACKAGES` and ``packages`` installed (None: not
    installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in dict.fromkeys([*CORE_PACKAGES, *packages]):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that is running (default: ``sys.orig_argv``), as a user types it: the program
    by its name (``onnx-masked-rnn``), ``python -m module`` or ``python scripts/x.py``."""
    argv = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    if len(argv) > 2 and argv[1] == "-m":  # python -m module ...
        words = ["python", "-m", *argv[2:]]
    elif len(argv) > 1 and argv[1].endswith(".py"):  # python script.py ...
        path = Path(argv[1])
        shown = f"scripts/{path.name}" if path.resolve().parent.name == "scripts" else argv[1]
        words = ["python", shown, *argv[2:]]
    elif len(argv) > 1 and not argv[1].startswith("-"):  # python /path/to/console-script ...
        words = [os.path.basename(argv[1]), *argv[2:]]
    else:
        words = ["python", *argv[1:]]
    return " ".join(shlex.quote(a) for a in words)


def start(kind: str, packages: Sequence[str] = (), command: str | None = None) -> dict[str, Any]:
    """A record's header, taken before the measurement: its kind, the date, the command (default:
    this process's), the machine with its load average now, the versions."""
    return {
        "kind": kind,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command if command is not None else command_line(),
        "machine": machine(),
        "versions": versions(packages),
    }


def finish(record: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``record`` with the load average after the measurement and the measurement's ``fields``."""
    record["machine"]["load_average_after"] = load_average()
    record.update(fields)
    return record


def write(record: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``record`` as indented JSON, whole or not at all."""
    write_atomic(Path(path), (json.dumps(record, indent=1) + "\n").encode())
