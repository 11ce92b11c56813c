"""The repository is formatted and linted as the guide asks: ruff (its configuration in
pyproject.toml) on the Python sources and README's code blocks, clang-format (kernel/.clang-format)
on the kernel's C++. Both tools are pinned in the test extra, so a new release cannot change the
verdict; upstream/ is checked by upstream/check.sh with onnx's own configurations."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from toolkit import ROOT


def run(*command: str) -> subprocess.CompletedProcess:
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is not installed: it is in the test extra (pip install '.[test]')")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing_to_lint():
    done = run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_nothing_to_format():
    done = run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_clang_format_finds_nothing_to_format_in_the_kernel():
    sources = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "kernel").iterdir() if p.suffix in {".h", ".cc"}
    )
    assert len(sources) >= 10, sources
    done = run("clang-format", "--dry-run", "--Werror", *sources)
    assert done.returncode == 0, done.stderr[-3000:]
