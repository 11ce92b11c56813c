"""README promises: it opens with exactly the two set-up commands, `.ci/run` runs the second,
and the onnxscript example it shows is the file the tests run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
COMMANDS = ["pip install . && onnx-masked-rnn conformance", "pip install '.[test]' && pytest"]


def test_readme_opens_with_the_two_setup_commands():
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block and README.index(first_block.group(0)) < README.index("\n## ")
    assert first_block.group(1).strip().splitlines() == COMMANDS


def test_ci_runs_the_readme_test_command():
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and line[0] != "#"]
    assert COMMANDS[1] in lines


def test_readme_example_is_the_tested_file():
    example = (ROOT / "examples" / "author_with_onnxscript.py").read_text().strip()
    blocks = [b.strip() for b in re.findall(r"```python\n(.*?)```", README, re.S)]
    assert example in blocks
