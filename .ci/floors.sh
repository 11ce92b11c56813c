#!/usr/bin/env bash
# The declared minimum versions, exactly: a fresh venv installs the package with every runtime
# dependency pinned to its floor (.ci/floors.txt, a constraints file) and runs the conformance
# suite on every built-in backend and the core tests: everything but the tests of the optional parts
# (Keras, PyTorch, and the OpenVINO and tract backends, which the test extra pins at their newest
# releases). Left out, each with its reason:
# - tests/keras, tests/torch, the *keras*/*torch* test files, docs/test_pytorch_md.py, docs/test_readme.py
#   (its quick starts run torch and Keras), test_extras.py (the missing-extra messages need torch and
#   Keras absent and present), test_emitted_constructs' float16 tagger (exported from torch): the
#   optional extras, not installed here;
# - test_architecture.py and test_style.py: they read the package's source, which this copy leaves out
#   on purpose (and the style tools are in the test extra);
# - conformance/test_runtimes.py and test_runner's `all` backends: OpenVINO and tract are not installed;
# - the byte comparison with the shipped suite and the spec's rendered sections: both are made by
#   the development environment's newest onnx/onnxscript, whose serialisation and renderer differ by
#   version. README's test command (the first step of .ci/run) runs every one of these.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTEST_ADDOPTS  # this run's options are the ones below (a caller's --junitxml is for README's command)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
python3 -m venv "$root/venv"
"$root/venv/bin/pip" install -q -c .ci/floors.txt . pytest hypothesis 2>&1 | grep -v '^WARNING: Location' || true
"$root/venv/bin/pip" list 2>/dev/null | grep -i -E '^(numpy|onnx|onnx[-_]ir|onnxscript|onnxruntime|ml[-_]dtypes|protobuf|pytest|hypothesis) '
# Run from a copy of the repository without the package's source, so that the installed package
# (at the floors) is what the tests import.
mkdir "$root/src"
tar --exclude=./onnx_masked_rnn --exclude=./.git -cf - . | tar -xf - -C "$root/src"
cd "$root/src"
"$root/venv/bin/python" -c 'import onnx_masked_rnn'  # the install worked
"$root/venv/bin/onnx-masked-rnn" conformance
"$root/venv/bin/python" -m pytest -q -p no:cacheprovider tests \
    --ignore=tests/keras --ignore=tests/torch --ignore-glob='tests/*/test_*keras*.py' \
    --ignore-glob='tests/*/test_*torch*.py' --ignore=tests/docs/test_pytorch_md.py --ignore=tests/docs/test_readme.py --ignore=tests/test_extras.py \
    --ignore=tests/test_architecture.py --ignore=tests/test_style.py --deselect=tests/test_emitted_constructs.py::test_float16_tagger_exported_from_torch_runs_under_ort_enable_all \
    --ignore=tests/conformance/test_runtimes.py \
    --deselect tests/conformance/test_runner.py::test_all_means_every_installed_builtin_backend \
    --deselect tests/conformance/test_suite.py::test_shipped_data_is_current \
    --deselect tests/docs/test_spec.py::test_generated_sections_are_in_sync
