"""What ``onnx-masked-rnn --help`` and each subcommand's ``--help`` say: plain text (no
reStructuredText markup), every subcommand named in the module's docstring, and the closing line
``conformance --help`` promises is the one a run prints."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from onnx_masked_rnn import cli
from onnx_masked_rnn.conformance.backends import BUILTIN

# reStructuredText that argparse would print as it is: ``literal``, :role:`target`, **strong**.
MARKUP = re.compile(r"``|:[a-z]+:`|\*\*")


def subcommands() -> list[str]:
    """The subcommands, as the top-level usage line lists them."""
    (names,) = re.findall(r"\{([a-z,-]+)\}", cli.build_parser().format_usage())
    return names.split(",")


def test_the_docstring_names_every_subcommand():
    names = subcommands()
    assert len(names) == 7, sorted(names)
    missing = [name for name in names if f"``{name}" not in cli.__doc__]
    assert not missing, f"cli.py's docstring does not name {missing}"


@pytest.mark.parametrize("command", ["", *subcommands()])
def test_help_is_plain_text(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"] if command else ["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "usage: onnx-masked-rnn" in text
    assert not MARKUP.findall(text), text
    assert len(text.split("\n\n")) >= 2  # a description or the options, beyond the usage


def test_conformance_help_names_every_builtin_backend(capsys):
    with pytest.raises(SystemExit):
        cli.main(["conformance", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert [name for name in BUILTIN if not re.search(rf"(^|[ ,(]){re.escape(name)}[ ,)]", text)] == []


def test_conformance_ends_with_the_line_its_help_promises(capsys):
    with pytest.raises(SystemExit):
        cli.main(["conformance", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    (promise,) = re.findall(r"ends with '([^']*)'", text)
    pattern = re.escape(promise).replace("N", r"\d+")
    done = subprocess.run(
        [sys.executable, "-m", "onnx_masked_rnn", "conformance", "--backend", "reference"]
        + ["--filter", "test_masked_rnn_defaults$"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(pattern, last), (promise, last)
