"""The source distribution holds what builds and installs the package and nothing else: no tests
(they need the whole checkout: conftest, helpers, docs, spec, examples), and a wheel built from it
has every file of the package. Its long description is README, whole."""

from __future__ import annotations

import email
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from toolkit import ROOT

import onnx_masked_rnn

# What the sdist may hold at its top level, beside PKG-INFO: the build's files, the package, the
# kernel's C++ sources.
TOP_LEVEL = {"pyproject.toml", "README.md", "LICENSE", "CMakeLists.txt", ".gitignore", "PKG-INFO"}
TOP_DIRS = {"onnx_masked_rnn", "kernel"}


def tracked(*folders: str) -> set[str]:
    done = subprocess.run(
        ["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"not a git checkout, so the package's files are not known: {done.stderr.strip()}")
    return set(done.stdout.split())


def build(kind: str, source: Path, out: Path, **env: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.iterdir()
    return built


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tuple[Path, set[str]]:
    pytest.importorskip("build", reason="the sdist is built with `build` (the [test] extra)")
    out = tmp_path_factory.mktemp("sdist")
    archive = build("sdist", ROOT, out)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        root = names[0].split("/")[0]
        tar.extractall(out / "unpacked", filter="data")
    files = {n.split("/", 1)[1] for n in names if "/" in n and not (out / "unpacked" / n).is_dir()}
    return out / "unpacked" / root, files


def test_sdist_holds_the_package_and_its_build_but_no_tests(sdist):
    _, files = sdist
    top = {f.split("/")[0] for f in files}
    assert top <= TOP_LEVEL | TOP_DIRS, sorted(top - TOP_LEVEL - TOP_DIRS)
    assert {"pyproject.toml", "README.md", "LICENSE", "CMakeLists.txt"} <= top
    assert not [f for f in files if "__pycache__" in f or f.endswith((".pyc", ".so"))]
    missing = tracked("onnx_masked_rnn", "kernel") - files
    assert not missing, sorted(missing)[:10]


def test_sdist_long_description_is_readme(sdist):
    folder, _ = sdist
    metadata = email.message_from_string((folder / "PKG-INFO").read_text())
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().strip() == (ROOT / "README.md").read_text().strip()


def test_a_wheel_builds_from_the_sdist_with_every_package_file(sdist, tmp_path):
    """Without the kernel (ONNX_MASKED_RNN_NO_KERNEL=1: no compiler needed here), so the test is
    about what the sdist holds; `pip install .` in CI builds the kernel itself."""
    folder, _ = sdist
    wheel = build("wheel", folder, tmp_path, ONNX_MASKED_RNN_NO_KERNEL="1")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = tracked("onnx_masked_rnn") - names
    assert not missing, sorted(missing)[:10]
    assert "onnx_masked_rnn/kernel/BUILT_WITHOUT_KERNEL" in names


def test_the_tests_and_their_children_import_the_same_copy_of_the_package():
    """The children the tests start (``python -c`` from the checkout, spawned workers, which take
    this process's ``sys.path``) import the package this process imported, the installed one: a
    checkout on the path would hand them its uncompiled copy (no kernel library)."""
    done = subprocess.run(
        [sys.executable, "-c", "import onnx_masked_rnn; print(onnx_masked_rnn.__file__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == onnx_masked_rnn.__file__
    installed_elsewhere = Path(onnx_masked_rnn.__file__).resolve().parents[1] != ROOT.resolve()
    # A checkout without the package's source (.ci/floors.sh's copy) on the path hands nobody a copy.
    if installed_elsewhere and (ROOT / "onnx_masked_rnn").is_dir():
        assert str(ROOT) not in sys.path and str(ROOT.resolve()) not in sys.path


# What scripts may import that the test extra has and a floors environment (.ci/floors.sh) lacks.
OPTIONAL = ("keras", "torch", "jax", "matplotlib", "tensorflow", "tf2onnx", "openvino", "tract")
SCRIPTS = sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "upstream").glob("*.py")])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_importing_a_script_leaves_sys_path_alone(script):
    """Tests import scripts for their functions; a script that puts the checkout on ``sys.path`` when
    imported would hand every later test, and the children they start, the uncompiled copy."""
    child = f"""
import importlib.util, sys
before = list(sys.path)
spec = importlib.util.spec_from_file_location("script", {str(script)!r})
module = sys.modules["script"] = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
except ModuleNotFoundError as error:
    if error.name not in {OPTIONAL!r}:
        raise
    print("missing", error.name)
    raise SystemExit
print([] if sys.path == before else sys.path[: len(sys.path) - len(before)])
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    if done.stdout.startswith("missing "):
        pytest.skip(f"{script.name} imports {done.stdout.split()[1]}, an optional dependency not installed")
    assert done.stdout.strip() == "[]"
