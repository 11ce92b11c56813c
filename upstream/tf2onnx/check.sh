#!/usr/bin/env bash
# Applies the tf2onnx patch series to tf2onnx's source distribution and runs its tests.
#
#   bash upstream/tf2onnx/check.sh [--record FILE]   FILE: docs/results/tf2onnx_check.json
#
# Steps: patches/ is what `upstream/series.py --root upstream/tf2onnx` writes from the sources and each
# series applies on its own base (series.py check); the series applied with `git am` on the sdist of
# BASE; ruff with tf2onnx's configuration (its pyproject.toml) on the Python files they add or edit;
# the patched tf2onnx installed into a venv with tensorflow-cpu, tf_keras and onnxruntime (no torch),
# and the onnx wheel upstream/check.sh built (the ai.onnx.preview masked operators: run it first);
# then one pytest suite per series (its new tests and tf2onnx's own tests of what it touches), run
# from the applied tree's tests/ against the installed package. Ends with one line
# "N passed, N failed" (upstream/summarize.py); exits non-zero on any failure.
#
# Uses the package index (pip) only. The venv (TensorFlow: about 2 GB, the slow part) is kept in
# $TF2ONNX_UPSTREAM_CACHE (default ~/.cache/onnx-masked-rnn-tf2onnx) while its requirements are the
# same; a rerun reinstalls only the patched tf2onnx.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
UPSTREAM="$(cd "$HERE/.." && pwd)"
VERSION="$(cat "$HERE/BASE")"
CACHE="${TF2ONNX_UPSTREAM_CACHE:-$HOME/.cache/onnx-masked-rnn-tf2onnx}"
ONNX_WHEELS="${ONNX_UPSTREAM_CACHE:-$HOME/.cache/onnx-masked-rnn-upstream}/wheel"
PYTHON="${PYTHON:-python3.11}"
RECORD=""
if (($#)); then
  if [[ $# -eq 2 && "$1" == --record ]]; then
    RECORD="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
  else
    echo "usage: check.sh [--record FILE]" >&2
    exit 2
  fi
fi
SRC="$CACHE/src" RESULTS="$CACHE/results" VENV="$CACHE/venv"
START=$(date +%s)

step() { echo "=== [$(($(date +%s) - START)) s] $*"; }

mkdir -p "$CACHE"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"

step "venv (made anew when its requirements change): tensorflow-cpu, tf_keras, keras 3, onnxruntime"
# TensorFlow 2.21 brings Keras 3; tf_keras is the Keras 2 that TF_USE_LEGACY_KERAS=1 selects.
REQUIREMENTS="tensorflow-cpu==2.21.0 tf_keras==2.21.0 keras==3.15.1 onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 pytest parameterized pyyaml ruff==0.17.6"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
if [[ "$(cat "$VENV/requirements.txt" 2>/dev/null)" != "$REQUIREMENTS" ]]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  # shellcheck disable=SC2086
  "${PIP[@]}" $REQUIREMENTS
  echo "$REQUIREMENTS" >"$VENV/requirements.txt"
fi

step "tf2onnx $VERSION source distribution"
SDIST="$CACHE/sdist/tf2onnx-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary tf2onnx \
    "tf2onnx==$VERSION" -d "$CACHE/sdist"
fi

step "patches/ is up to date and each series applies on its base (series.py check --root)"
"$PYTHON" "$UPSTREAM/series.py" check --root "$HERE" --sdist "$SDIST"

step "git repository of the sdist + git am patches/*/"
rm -rf "$SRC" && mkdir -p "$SRC"
tar xzf "$SDIST" -C "$SRC" --strip-components=1 --no-same-owner
GIT=(git -C "$SRC" -c user.name="onnx-masked-rnn tf2onnx check" -c user.email="tf2onnx-check@localhost"
  -c commit.gpgsign=false)
"${GIT[@]}" init -q
"${GIT[@]}" add -A
GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
  "${GIT[@]}" commit -q -m "tf2onnx $VERSION (source distribution)"
"${GIT[@]}" tag base
"${GIT[@]}" am -q "$HERE"/patches/*/*.patch
"${GIT[@]}" log --oneline | cat

step "ruff (tf2onnx's configuration: the tree's pyproject.toml) on the Python files the series add or edit"
mapfile -t CHANGED_PY < <("${GIT[@]}" diff --name-only base HEAD -- '*.py')
# tf2onnx's own files are not ruff-formatted: check the format of the added files only.
mapfile -t ADDED_PY < <("${GIT[@]}" diff --name-only --diff-filter=A base HEAD -- '*.py')
(cd "$SRC" && "$VENV/bin/ruff" check -q "${CHANGED_PY[@]}" && "$VENV/bin/ruff" format -q --check "${ADDED_PY[@]}")

step "the patched tf2onnx and upstream/check.sh's onnx wheel (the onnx series) into the venv"
"${PIP[@]}" --no-deps --force-reinstall "$SRC"
# The wheel of the onnx series on its base (upstream/BASE); `check.sh --source` leaves one of another version.
ONNX_VERSION="$(cat "$UPSTREAM/BASE")"
mapfile -t WHEELS < <(ls "$ONNX_WHEELS"/onnx-"$ONNX_VERSION"-*.whl 2>/dev/null || true)
if ((${#WHEELS[@]})); then
  # Copied first: upstream/check.sh empties its wheel folder when it rebuilds.
  mkdir -p "$CACHE/onnx-wheel" && rm -f "$CACHE"/onnx-wheel/*.whl && cp "${WHEELS[@]}" "$CACHE/onnx-wheel/"
  "${PIP[@]}" --no-deps --force-reinstall "$CACHE"/onnx-wheel/onnx-*.whl
elif ls "$CACHE"/onnx-wheel/onnx-*.whl >/dev/null 2>&1; then
  # upstream/check.sh is rebuilding it (its folder is empty meanwhile): the copy of the last run's.
  echo "no onnx $ONNX_VERSION wheel in $ONNX_WHEELS (being rebuilt?): the copy from $(date -r "$CACHE"/onnx-wheel/onnx-*.whl -u +%FT%TZ)"
  "${PIP[@]}" --no-deps --force-reinstall "$CACHE"/onnx-wheel/onnx-*.whl
else
  echo "no onnx $ONNX_VERSION wheel in $ONNX_WHEELS: series 2-keras-masked-rnn needs the ai.onnx.preview schemas of the" \
    "onnx series; run \`flock /tmp/team/upstream.lock bash upstream/check.sh\` first" >&2
  exit 1
fi
"$VENV/bin/python" -c "import importlib.util, sys; sys.exit('torch is installed in the tf2onnx venv') \
  if importlib.util.find_spec('torch') else None"
"$VENV/bin/python" -c "import onnx, onnx.defs, tf2onnx; print('tf2onnx', tf2onnx.__version__, tf2onnx.__file__); \
  print('onnx', onnx.__version__, onnx.__file__); onnx.defs.get_schema('MaskedLSTM', 1, 'ai.onnx.preview')"

# tf2onnx's own tests that cannot run here, each with its reason; they fail on the unpatched sdist too.
# Printed, never dropped silently.
DESELECTED=(
  "tests/test_api.py::ApiTests::test_graphdef|the sdist ships no tests/models (tests/models/regression/graphdef/frozen.pb)"
  "tests/test_api.py::ApiTests::test_tflite|the sdist ships no tests/models (test_api_model.tflite)"
  "tests/test_api.py::ApiTests::test_tflite_without_input_output_names|the sdist ships no tests/models (test_api_model.tflite)"
  "tests/test_api.py::ApiTests::test_keras_api_large|tf2onnx 1.17's large-model path (graph.py update_proto) uses an attribute numpy 2 removed"
)
DESELECT_ARGS=()
for entry in "${DESELECTED[@]}"; do
  echo "deselected: ${entry%%|*} (${entry#*|})"
  DESELECT_ARGS+=(--deselect "${entry%%|*}")
done

SUITES=()
run_pytest() {  # name, then pytest arguments; tf2onnx is the installed package, not the tree's
  local name=$1
  shift
  SUITES+=("$RESULTS/$name.xml")
  step "pytest: $name"
  # TF_USE_LEGACY_KERAS=1: tf2onnx's own tests use tf.keras as Keras 2 (tf_keras); the new tests
  # import keras (Keras 3) or tf_keras themselves.
  # onnx is imported before TensorFlow: the wheel upstream/check.sh builds links Debian's shared
  # libprotobuf, and loaded after TensorFlow (whose libraries export protobuf's symbols) its
  # onnx.defs.get_all_schemas_with_history(), which tf2onnx calls on import, crashes (SIGSEGV).
  # argv[0] names pytest: tf2onnx's tests/common.py parses the command line otherwise.
  (cd "$SRC/tests" && TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c \
    "import sys, onnx.defs, pytest; sys.argv[0] = 'pytest'; sys.exit(pytest.main(sys.argv[1:]))" -q \
    -p no:cacheprovider --color=no -o addopts="" -rfE --junitxml="$RESULTS/$name.xml" "${DESELECT_ARGS[@]}" \
    "$@" 2>&1 | grep -E "^(FAILED|ERROR) | passed| failed| error" | cut -c1-300) || true
}

# One suite per series: its new tests, then tf2onnx's own tests of the code it changes.
# 1-keras3-sequential changes from_keras (convert.py): test_api.py converts Keras models and
# tf.functions through it.
run_pytest 1-keras3-sequential test_keras3_sequential.py test_api.py
# 2-keras-masked-rnn changes the TF2 LSTM and GRU rewriters (test_lstm.py, test_gru.py: TF and Keras
# layers, sequence_lens, bidirectional) and Graph.make_model (every conversion: test_api.py runs it too).
run_pytest 2-keras-masked-rnn test_keras_masked_rnn.py test_lstm.py test_gru.py

step "done in $(($(date +%s) - START)) s"
RECORD_ARGS=()
if [[ -n "$RECORD" ]]; then
  REPO="$(cd "$UPSTREAM/.." && pwd)"
  # The tree: the sdist, and the venv's pins (summarize.py runs outside the venv, so its versions
  # line would be this interpreter's, not the tests').
  RECORD_ARGS+=(--json "$RECORD" --command "bash upstream/tf2onnx/check.sh --record ${RECORD#"$REPO"/}"
    --onnx "tf2onnx $VERSION (sdist), venv: $REQUIREMENTS, onnx from the onnx series' wheel ($ONNX_VERSION)"
    --base "$VERSION" --seconds "$(($(date +%s) - START))"
    --revision "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)")
fi
"$PYTHON" "$UPSTREAM/summarize.py" "${RECORD_ARGS[@]}" "${SUITES[@]}"
