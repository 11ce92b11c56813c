"""``series.py check`` fails when upstream/patches is not what the sources give.

Each test copies upstream/ (without its docs), changes one thing and runs the copy's
``series.py check`` on the source distribution check.sh uses.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parent.parent
SDIST = Path(subprocess.run(  # the cached sdist series.py itself would use
    [sys.executable, "-c", "import series; print(series.sdist_path(open('BASE').read().strip()))"],
    cwd=UPSTREAM, capture_output=True, text=True, check=True,
).stdout.strip())  # fmt: skip


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    copy = tmp_path / "upstream"
    top_level = {"docs", "tests"}
    shutil.copytree(
        UPSTREAM,
        copy,
        ignore=lambda folder, names: [n for n in names if Path(folder) == UPSTREAM and n in top_level],
    )
    return copy


def check(upstream: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(upstream / "series.py"), "check", "--sdist", str(SDIST)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_changed_source_makes_its_patch_stale(upstream: Path) -> None:
    source = upstream / "onnx/onnx/defs/preview/masked_lstm.cc"
    source.write_text(source.read_text() + "// changed\n")
    result = check(upstream)
    assert result.returncode == 1
    assert "stale" in result.stderr and "4-masked-lstm/0001-" in result.stderr
    assert "5-masked-gru-rnn" not in result.stderr


def test_a_patch_edited_by_hand_is_stale(upstream: Path) -> None:
    (patch,) = (upstream / "patches/1-reference-scan").glob("0001-*.patch")
    patch.write_text(patch.read_text().replace("Scan", "SCAN", 1))
    result = check(upstream)
    assert result.returncode == 1
    assert f"1-reference-scan/{patch.name}" in result.stderr


def test_a_missing_patch_is_stale(upstream: Path) -> None:
    (patch,) = (upstream / "patches/4-masked-lstm").glob("0003-*.patch")
    patch.unlink()
    result = check(upstream)
    assert result.returncode == 1
    assert f"4-masked-lstm/{patch.name}" in result.stderr


def test_a_file_no_commit_adds_is_an_error(upstream: Path) -> None:
    (upstream / "onnx/onnx/defs/preview/stray.cc").write_text("")
    result = check(upstream)
    assert result.returncode == 1
    assert "no commit adds" in result.stderr and "stray.cc" in result.stderr


def test_a_series_that_needs_more_than_it_requires_does_not_apply(upstream: Path) -> None:
    manifest = upstream / "series.toml"
    text = manifest.read_text()
    assert '  "4-masked-lstm",\n]' in text
    manifest.write_text(text.replace('  "4-masked-lstm",\n]', "]"))
    result = check(upstream)
    assert result.returncode == 1
    assert "series 5-masked-gru-rnn does not apply" in result.stderr
