"""README's promises. It opens with one paragraph on what the ops are, then exactly the two set-up
commands (`.ci/run` runs the second); every code block in it is run here, each quick start in a
child process in a fresh folder as a user would run it; it reads right as the wheel's long
description (no relative links); every path it names exists; its install lines name real extras;
it types no measured number outside the generated sections; and `pytest` imports the installed
package, not the files of the folder it runs in, as README says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import onnx
import pytest
from toolkit import ROOT

from onnx_masked_rnn import DOMAIN, cli
from onnx_masked_rnn.conformance import DATA_DIR

README = (ROOT / "README.md").read_text()
COMMANDS = ["pip install . && onnx-masked-rnn conformance", "pip install '.[test]' && pytest"]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
QUICK_STARTS = ["Keras 3 user", "PyTorch user", "Converter author (onnxscript)", "Runtime author"]
GENERATED = re.compile(
    r"<!-- BEGIN GENERATED (?P<name>[\w-]+).*?-->.*?<!-- END GENERATED (?P=name) -->", re.S
)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """``(heading, language, code)`` of every fenced block, under the nearest heading above it."""
    found = []
    for match in FENCE.finditer(README):
        headings = re.findall(r"^#+ (.+)$", README[: match.start()], re.M)
        found.append((headings[-1], match.group(1), match.group(2)))
    return found


def block(heading: str, language: str) -> str:
    (code,) = [c for h, lang, c in blocks() if h == heading and lang == language]
    return code


def run_python(code: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    """``code`` as a script file in ``cwd`` (onnxscript's ``@script`` reads its function's source)."""
    (cwd / "quick_start.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "quick_start.py"],
        cwd=cwd,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    return done


def child_env(**changes: str | None) -> dict[str, str]:
    """This environment with the console scripts on PATH and ``changes`` applied (None: unset)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def masked_nodes(model: onnx.ModelProto) -> int:
    """The masked nodes of the main graph (the quick starts' models have no subgraph around them)."""
    return sum(node.domain == DOMAIN for node in model.graph.node)


def prose() -> str:
    """README without its generated sections and code blocks."""
    return FENCE.sub("", GENERATED.sub("", README))


# --- shape ---------------------------------------------------------------------------------------


def test_readme_opens_with_one_paragraph_on_the_ops_then_the_two_setup_commands():
    first = FENCE.search(README)
    title, *paragraphs = [p for p in README[: first.start()].split("\n\n") if p.strip()]
    assert title.startswith("# ") and len(paragraphs) == 1, paragraphs
    assert all(op in paragraphs[0] for op in ("MaskedLSTM", "MaskedGRU", "MaskedRNN", "mask"))
    assert first.group(1) == "bash" and first.group(2).strip().splitlines() == COMMANDS


def test_ci_runs_the_readme_test_command():
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and line[0] != "#"]
    assert COMMANDS[1] in lines


def test_every_code_block_is_one_the_tests_run():
    """A new block fails here until a test runs it (this list says which)."""
    assert [(h, lang) for h, lang, _ in blocks()] == [
        ("onnx-masked-rnn", "bash"),  # the set-up commands: .ci/run and the conformance tests
        ("Installing, with the extras", "bash"),  # test_install_lines_work_from_a_checkout
        ("Keras 3 user", "bash"),
        ("Keras 3 user", "python"),
        ("PyTorch user", "python"),
        ("Converter author (onnxscript)", "python"),
        ("Runtime author", "python"),
        ("Runtime author", "bash"),
        ("Which form to deploy", "python"),  # the kernel
        ("Command line", "bash"),  # test_command_line_block_is_the_cli
    ]


def test_quick_starts_are_at_most_ten_lines():
    for heading, language, code in blocks():
        if heading in QUICK_STARTS and language == "python":
            lines = [line for line in code.splitlines() if line.strip()]
            assert len(lines) <= 10, (heading, len(lines))


def test_long_description_reads_right_without_the_repository():
    """PyPI renders README without the repository: a relative link would break there."""
    assert PYPROJECT["project"]["readme"] == "README.md"
    targets = re.findall(r"\]\(([^)]*)\)", README) + re.findall(r"""(?:href|src)=["']([^"']*)""", README)
    relative = [t for t in targets if not re.match(r"https?://", t)]
    assert not relative, relative


def test_every_path_readme_names_exists():
    named = re.findall(r"`([\w./-]+)`", README)
    paths = [n for n in named if re.match(r"(docs|spec|examples|scripts|upstream|tests|\.ci)/|\w+\.md$", n)]
    assert len(paths) > 10, paths
    assert [p for p in paths if not (ROOT / p).exists()] == []


def test_no_measured_number_outside_the_generated_sections():
    """Ratios, times, counts of passed cases and errors come from docs/results/ only."""
    measured = re.findall(
        r"\d+(?:\.\d+)?x\b|\d+(?:\.\d+)? ?(?:s|ms|min|minutes|seconds)\b|\d+ (?:passed|failed)|\de-\d",
        prose(),
    )
    assert measured == []
    assert {m.group("name") for m in GENERATED.finditer(README)} >= {
        "deployment-forms",
        "pytest-times-summary",
    }


def test_install_lines_work_from_a_checkout():
    """The package is not on the index: every install names the checkout ('.') and a real extra,
    in README, docs/ and the package's messages; torch's CPU build is installed first."""
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    texts = {p: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    texts |= {p: p.read_text() for p in sorted((ROOT / "onnx_masked_rnn").rglob("*.py"))}
    for path, text in texts.items():
        assert "onnx-masked-rnn[" not in text, path
        for extra in re.findall(r"pip install (?:-e )?'\.\[([a-z]+)\]'", text):  # not a placeholder
            assert extra in extras, (path, extra)
    torch_first = block("Installing, with the extras", "bash").strip()
    pinned = [r for r in PYPROJECT["project"]["optional-dependencies"]["test"] if r.startswith("torch")]
    assert torch_first == f"pip install {pinned[0]} --index-url https://download.pytorch.org/whl/cpu"
    assert {"keras", "torch", "bench", "test"} <= set(re.findall(r"pip install '\.\[(\w+)\]'", README))


def help_text(capsys: pytest.CaptureFixture, *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return capsys.readouterr().out


def test_command_line_block_is_the_cli(capsys):
    """Each line of the block is a subcommand, every subcommand has a line, and every option a line
    shows is one of that subcommand's."""
    names = []
    for line in block("Command line", "bash").strip().splitlines():
        command, name, *_ = line.split()
        assert command == "onnx-masked-rnn"
        names.append(name)
        shown = help_text(capsys, name)
        for option in re.findall(r"--[\w-]+", line):
            assert option in shown, (name, option)
    assert sorted(names) == sorted(re.findall(r"\{([a-z,-]+)\}", help_text(capsys))[0].split(","))


# --- the quick starts, run -----------------------------------------------------------------------


def test_keras_quick_start(tmp_path):
    """In a process with no KERAS_BACKEND but the one the bash block exports."""
    exports = dict(re.findall(r"^export (\w+)=(\S+)", block("Keras 3 user", "bash"), re.M))
    assert exports == {"KERAS_BACKEND": "torch"}
    run_python(block("Keras 3 user", "python"), tmp_path, child_env(**exports))
    model = onnx.load(tmp_path / "model.onnx")
    assert masked_nodes(model) == 1
    assert [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim] == ["batch", "time"]


def test_pytorch_quick_start(tmp_path):
    """The exported model equals the eager one at another batch size and length."""
    check = textwrap.dedent(
        """
        import numpy as np
        import onnx
        import onnxruntime

        assert sum(n.domain == "io.onnx_masked_rnn" for n in onnx.load("encoder.onnx").graph.node) == 1
        x, lengths = torch.randn(13, 3, 16), torch.tensor([13, 6, 1])
        session = onnxruntime.InferenceSession("encoder.onnx")
        (y,) = session.run(None, {"x": x.numpy(), "lengths": lengths.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(y, model(x, lengths).numpy(), rtol=1e-5, atol=1e-6)
        """
    )
    run_python(block("PyTorch user", "python") + check, tmp_path)


def test_converter_author_quick_start(tmp_path):
    """The model runs in onnxruntime and equals the reference on a mask with holes."""
    check = textwrap.dedent(
        """
        import numpy as np
        import onnxruntime

        rng = np.random.default_rng(0)
        feeds = {
            "X": rng.standard_normal((6, 3, 8), np.float32),
            "W": rng.standard_normal((1, 64, 8), np.float32) * 0.5,
            "R": rng.standard_normal((1, 64, 16), np.float32) * 0.5,
            "mask": rng.random((6, 3)) > 0.3,
        }
        (y_h,) = onnxruntime.InferenceSession(model.SerializeToString()).run(None, feeds)
        _, expected, _ = onnx_masked_rnn.reference.masked_lstm(**feeds, hidden_size=16)
        np.testing.assert_allclose(y_h, expected, rtol=1e-5, atol=1e-6)
        """
    )
    run_python(block("Converter author (onnxscript)", "python") + check, tmp_path)


def test_runtime_author_quick_start(tmp_path):
    """The backend file and the command as README shows them, in a fresh folder: the whole suite."""
    (tmp_path / "my_runtime.py").write_text(block("Runtime author", "python"))
    (command,) = block("Runtime author", "bash").strip().splitlines()
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=child_env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"(\d+) passed, 0 failed, (\d+) skipped", last), last
    assert "my_runtime:MyBackend" in done.stdout


def test_kernel_block(tmp_path):
    """The three lines on a model that keeps its masked node; the session equals the case's outputs."""
    kernel = pytest.importorskip("onnx_masked_rnn.kernel")
    try:
        kernel.library_path()
    except kernel.KernelNotBuiltError as exc:
        pytest.skip(f"the kernel library is not built here: {exc}")
    case = DATA_DIR / "node" / "test_masked_lstm_bidirectional_carry"
    shutil.copy(case / "model.onnx", tmp_path / "model.onnx")
    check = textwrap.dedent(
        f"""
        import numpy as np
        import onnx
        from onnx import numpy_helper

        data = {str(case / "test_data_set_0")!r}
        model = onnx.load("model.onnx")
        feeds = {{i.name: numpy_helper.to_array(onnx.load_tensor(f"{{data}}/input_{{k}}.pb"))
                  for k, i in enumerate(model.graph.input)}}
        for k, actual in enumerate(session.run(None, feeds)):
            expected = numpy_helper.to_array(onnx.load_tensor(f"{{data}}/output_{{k}}.pb"))
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
        """
    )
    run_python(block("Which form to deploy", "python") + check, tmp_path)


# --- what pytest imports -------------------------------------------------------------------------


def test_pytest_imports_the_installed_package_not_the_folder_it_runs_in(tmp_path):
    """README: after `pip install .`, `pytest` tests the installed copy. With this project's pytest
    configuration, run as the `pytest` command runs (no current folder on sys.path), a folder that
    holds its own `onnx_masked_rnn/` still gets the installed one."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "onnx_masked_rnn").mkdir()
    (tmp_path / "onnx_masked_rnn" / "__init__.py").write_text("raise ImportError('the folder copy')\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_where.py").write_text(
        "import onnx_masked_rnn\n\ndef test_where():\n    print('FROM', onnx_masked_rnn.__file__)\n"
    )
    runner = (
        "import sys; sys.path.pop(0); import pytest; "
        "sys.exit(pytest.main(['-q', '-s', '-p', 'no:cacheprovider']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", runner], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (where,) = re.findall(r"^FROM (.*)$", done.stdout, re.M)
    assert not Path(where).is_relative_to(tmp_path), where
    import onnx_masked_rnn

    assert Path(where) == Path(onnx_masked_rnn.__file__)
