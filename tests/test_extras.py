"""A missing optional dependency is one line naming the extra that installs it, with the install
from a checkout (the package is not on the index) and, when torch is missing, torch first in the
build the user wants. Each case runs in a child process where the module is blocked
(``sys.modules[name] = None``: ``import name`` raises ``ModuleNotFoundError`` as if absent)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from onnx_masked_rnn.extras import install_hint

TORCH_FIRST = "install torch first in the build you want (CPU or CUDA"

CHILD = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None
try:
{body}
except ImportError as exc:
    print(json.dumps({{"message": str(exc), "type": type(exc).__name__,
                      "chained": exc.__cause__ is not None
                      or (exc.__context__ is not None and not exc.__suppress_context__)}}))
else:
    print(json.dumps(None))
"""


def run_blocked(blocked: list[str], body: str) -> dict | None:
    code = CHILD.format(blocked=blocked, body=textwrap.indent(textwrap.dedent(body), "    "))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_one_line(error: dict | None, needed: str, extra: str, torch_first: bool) -> None:
    assert error is not None, "no ImportError"
    message = error["message"]
    assert error["type"] == "ImportError" and not error["chained"], error
    assert "\n" not in message, message
    assert f"needs {needed}, which is not installed" in message, message
    assert f"pip install '.[{extra}]' in a checkout of onnx-masked-rnn" in message, message
    assert (TORCH_FIRST in message) == torch_first, message


def test_torch_subpackage_without_torch_names_the_torch_extra():
    error = run_blocked(["torch"], "import onnx_masked_rnn.torch")
    assert_one_line(error, "torch", "torch", torch_first=True)
    assert error["message"].startswith("onnx_masked_rnn.torch needs torch")


def test_keras_export_without_keras_names_the_keras_extra(tmp_path):
    model = tmp_path / "model.keras"
    model.write_bytes(b"")
    error = run_blocked(["keras"], f"import onnx_masked_rnn.keras as k; k.export({str(model)!r}, 'out.onnx')")
    assert_one_line(error, "Keras 3", "keras", torch_first=False)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_keras_export_without_torch_names_torch_first(tmp_path, backend, monkeypatch):
    """The export runs on Keras' torch backend whatever this process's backend is."""
    monkeypatch.setenv("KERAS_BACKEND", backend)
    model = tmp_path / "model.keras"
    model.write_bytes(b"")
    error = run_blocked(["torch"], f"import onnx_masked_rnn.keras as k; k.export({str(model)!r}, 'out.onnx')")
    assert_one_line(error, "torch", "keras", torch_first=True)


def test_keras_on_torch_without_torch_names_the_keras_extra(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    error = run_blocked(["torch"], "from onnx_masked_rnn.keras._backend import import_keras; import_keras()")
    assert_one_line(error, "torch", "keras", torch_first=True)


@pytest.mark.parametrize("blocked", ["torch", "keras"])
def test_convert_without_a_dependency_is_one_error_line(tmp_path, blocked):
    model = tmp_path / "model.keras"
    model.write_bytes(b"")
    code = (
        f"import sys; sys.modules[{blocked!r}] = None; from onnx_masked_rnn.cli import main; "
        f"sys.exit(main(['convert', {str(model)!r}, {str(tmp_path / 'out.onnx')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("onnx-masked-rnn convert: ")]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert not lines and len(errors) == 1, done.stderr
    assert errors[0].startswith("onnx-masked-rnn convert: error: ") and "unexpected" not in errors[0]
    assert "pip install '.[keras]' in a checkout of onnx-masked-rnn" in errors[0], errors[0]
    assert not (tmp_path / "out.onnx").exists()


def test_install_hints_are_from_a_checkout():
    for extra in ("bench", "keras", "torch", "test"):
        assert f"pip install '.[{extra}]' in a checkout of onnx-masked-rnn" in install_hint(extra)
    assert TORCH_FIRST not in install_hint("bench")
