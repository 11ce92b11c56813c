#!/usr/bin/env bash
# Builds onnx with the patch series and runs each series' tests on that one build.
#
#   bash upstream/check.sh                  onnx's source distribution of upstream/BASE
#   bash upstream/check.sh --source DIR     an onnx source tree or git directory (its HEAD), e.g.
#                                           the mirror of onnx main that the `fetch` tool gives
#   ... --record FILE                       also write the run's record (upstream/summarize.py) to
#                                           FILE: docs/results/upstream.json for the sdist,
#                                           docs/results/upstream_main.json for onnx main
#
# Steps: upstream/patches is what upstream/series.py writes from the sources and each series
# applies on its own base (series.py check); clang-format (format.sh --check); the series applied
# with `git am` in order; ruff with onnx's configuration on the Python files they add or edit;
# onnx built (ccache) and installed into a fresh venv; onnx's docs regenerated with its own tools
# (stat_coverage.py, gen_doc.py: tools/update_doc.sh without its `pip install -e`); then one pytest
# suite per series, onnx's own tests of what the series touch, and the checks common to all.
# Ends with one line "N passed, N failed"; exits non-zero on any failure.
#
# Uses the package index (pip) and Debian packages (apt-get) only. Everything reusable (build venv,
# sdist, ccache, pip cache) lives in $ONNX_UPSTREAM_CACHE (default ~/.cache/onnx-masked-rnn-upstream),
# so a rerun recompiles from ccache.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
VERSION="$(cat "$HERE/BASE")"
CACHE="${ONNX_UPSTREAM_CACHE:-$HOME/.cache/onnx-masked-rnn-upstream}"
PYTHON="${PYTHON:-python3.11}"
SOURCE=""
RECORD=""
while (($#)); do
  case "$1" in
    --source) SOURCE="$(cd "$2" && pwd)"; shift 2 ;;
    --record) RECORD="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    *) echo "usage: check.sh [--source DIR] [--record FILE]" >&2; exit 2 ;;
  esac
done
# Fixed paths per kind of tree: ccache hits need the same paths on every run.
if [[ -n "$SOURCE" ]]; then
  SRC="$CACHE/src-source" RESULTS="$CACHE/results-source" KEPT_DOCS="$HERE/docs/main"
else
  SRC="$CACHE/src" RESULTS="$CACHE/results" KEPT_DOCS="$HERE/docs"
fi
START=$(date +%s)
# The series' revision, as the run starts: this checkout's commit, "-dirty" when the series' own
# files differ from it (UPSTREAM_REVISION names it when the checkout is not a git repository).
SERIES_FILES=(upstream/onnx upstream/edits upstream/patches upstream/series.toml upstream/tests
  upstream/check.sh upstream/summarize.py tests/static_errors.py onnx_masked_rnn ':(exclude)onnx_masked_rnn/kernel')
if REVISION="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)"; then
  git -C "$REPO" diff --quiet HEAD -- "${SERIES_FILES[@]}" || REVISION+="-dirty"
fi

step() { echo "=== [$(($(date +%s) - START)) s] $*"; }

mkdir -p "$CACHE"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"

step "Debian packages: libprotobuf-dev protobuf-compiler ccache"
missing=()
for package in libprotobuf-dev protobuf-compiler ccache; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

step "build venv (nanobind scikit-build-core cmake ninja protobuf)"
if [[ ! -x "$CACHE/build-venv/bin/python" ]]; then
  "$PYTHON" -m venv "$CACHE/build-venv"
fi
# nanobind must be installed: without it onnx's CMake tries to clone it from GitHub.
"$CACHE/build-venv/bin/pip" install -q --disable-pip-version-check nanobind scikit-build-core cmake ninja protobuf

step "onnx $VERSION source distribution"
SDIST="$CACHE/sdist/onnx-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  "$CACHE/build-venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary onnx \
    "onnx==$VERSION" -d "$CACHE/sdist"
fi

step "upstream/patches is up to date and each series applies on its base (series.py check)"
"$PYTHON" "$HERE/series.py" check --sdist "$SDIST"

step "clang-format 22.1.8 (onnx's pin and style) on the C++ sources (format.sh --check)"
bash "$HERE/format.sh" --check

rm -rf "$SRC" && mkdir -p "$SRC"
if [[ -z "$SOURCE" ]]; then
  step "git repository of the sdist + git am upstream/patches/*/"
  tar xzf "$SDIST" -C "$SRC" --strip-components=1
  DESCRIBED="onnx $VERSION (source distribution)"
elif git -C "$SOURCE" rev-parse --git-dir >/dev/null 2>&1; then
  step "git repository of $SOURCE's HEAD + git am upstream/patches/*/"
  git -C "$SOURCE" archive HEAD | tar x -C "$SRC"
  DESCRIBED="onnx $(git -C "$SOURCE" log -1 --format='%H (%cs)')"
else
  step "git repository of the tree $SOURCE + git am upstream/patches/*/"
  (cd "$SOURCE" && tar c --exclude=.git .) | tar x -C "$SRC"
  DESCRIBED="onnx tree $SOURCE"
fi
GIT=(git -C "$SRC" -c user.name="onnx-masked-rnn upstream check" -c user.email="upstream-check@localhost"
  -c commit.gpgsign=false)
"${GIT[@]}" init -q
"${GIT[@]}" add -A
GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
  "${GIT[@]}" commit -q -m "$DESCRIBED"
"${GIT[@]}" tag base
"${GIT[@]}" am -q "$HERE"/patches/*/*.patch
"${GIT[@]}" log --oneline | cat

step "ruff (onnx's configuration: the tree's pyproject.toml) on the Python files the series add or edit"
mapfile -t CHANGED_PY < <("${GIT[@]}" diff --name-only base HEAD -- '*.py')
"$CACHE/lint-venv/bin/pip" install -q --disable-pip-version-check ruff==0.17.6
(cd "$SRC" && "$CACHE/lint-venv/bin/ruff" check -q "${CHANGED_PY[@]}" &&
  "$CACHE/lint-venv/bin/ruff" format -q --check "${CHANGED_PY[@]}")

if [[ -f "$SRC/.clang-format" ]]; then
  step "format.sh's style formats the series' C++ files as the tree's own .clang-format does"
  mapfile -t CHANGED_CC < <("${GIT[@]}" diff --name-only base HEAD -- '*.cc' '*.h')
  (cd "$SRC" && "$CACHE/lint-venv/bin/clang-format" --dry-run --Werror "${CHANGED_CC[@]}")
fi

step "build onnx (ccache in $CACHE/ccache)"
rm -rf "$CACHE/wheel" && mkdir -p "$CACHE/wheel"
(
  cd "$SRC"
  export CCACHE_DIR="$CACHE/ccache" CCACHE_BASEDIR="$SRC" CCACHE_NOHASHDIR=true
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  # Debian's static libprotobuf.a is not built with -fPIC: link the shared library.
  export CMAKE_ARGS="-DONNX_USE_PROTOBUF_SHARED_LIBS=ON -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  ccache --zero-stats >/dev/null
  "$CACHE/build-venv/bin/pip" wheel -q --disable-pip-version-check . --no-deps --no-build-isolation \
    -w "$CACHE/wheel" >"$RESULTS/build.log" 2>&1 || { tail -50 "$RESULTS/build.log"; exit 1; }
  ccache --show-stats | grep -E "Hits|Misses" | head -3 || true
)

step "test venv (made anew when its requirements change) + the patched onnx"
VENV="$CACHE/test-venv"
# The package's own dependencies at the versions this repository is tested with, then the patched
# onnx over whatever onnx they pulled in.
REQUIREMENTS="numpy==2.4.6 onnxruntime==1.32.0 onnxscript==0.7.2 onnx_ir==1.1.0 ml_dtypes pytest parameterized pillow"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
if [[ "$(cat "$VENV/requirements.txt" 2>/dev/null)" != "$REQUIREMENTS" ]]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  # shellcheck disable=SC2086
  "${PIP[@]}" $REQUIREMENTS
  echo "$REQUIREMENTS" >"$VENV/requirements.txt"
fi
"${PIP[@]}" --no-deps --force-reinstall "$CACHE"/wheel/onnx-*.whl
"$VENV/bin/python" -c "import onnx, onnx.defs; print('onnx', onnx.__version__, onnx.__file__); \
  [onnx.defs.get_schema(op, 1, 'ai.onnx.preview') for op in ('MaskedLSTM', 'MaskedGRU', 'MaskedRNN')]"

step "docs regenerated with onnx's own tools (stat_coverage.py, gen_doc.py)"
# The sdist has no docs/ (they are made from scratch); a checkout tracks them (their diff is kept).
(cd "$SRC" && mkdir -p docs && "$VENV/bin/python" onnx/backend/test/stat_coverage.py >"$RESULTS/docs.log" 2>&1 &&
  "$VENV/bin/python" onnx/defs/gen_doc.py >>"$RESULTS/docs.log" 2>&1) || { tail -20 "$RESULTS/docs.log"; }
if [[ -n "$SOURCE" ]]; then
  mkdir -p "$KEPT_DOCS"
  "${GIT[@]}" diff --stat -- docs | tail -1
  "${GIT[@]}" diff -- docs >"$KEPT_DOCS/docs.diff"
fi

SUITES=()
run_pytest() {  # name, then pytest arguments; run outside the source tree so onnx is the wheel
  local name=$1
  shift
  SUITES+=("$RESULTS/$name.xml")
  step "pytest: $name"
  (cd "$RESULTS" && PYTHONPATH="$SRC/tests/python:$REPO:$HERE/tests" ONNX_UPSTREAM_SRC="$SRC" \
    ONNX_UPSTREAM_KEPT_DOCS="$KEPT_DOCS" ALLOW_RELEASED_ONNX_OPSET_ONLY=0 \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider --color=no --import-mode=importlib -W ignore::RuntimeWarning \
    -rfE --junitxml="$RESULTS/$name.xml" "$@" 2>&1 | grep -E "^(FAILED|ERROR) | passed| failed| error" | cut -c1-300) || true
}
T="$SRC/tests/python"
U="$HERE/tests"

# One suite per series, in order: its new tests on onnx's reference, shape inference and
# onnxruntime, and the cross-checks against this package.
run_pytest 1-reference-scan "$T/backend_reference_test.py" "$T/reference_evaluator_test.py" \
  "$U/test_onnxruntime.py" -k "scan"
run_pytest 2-inliner-omitted-inputs "$T/inliner_omitted_inputs_test.py" "$T/inliner_test.py"
run_pytest 3-rnn-doc-clarification "$U/test_rnn_docs.py"
MASKED_LSTM="masked_lstm or MaskedLSTM"
MASKED_GRU_RNN="masked_gru or MaskedGRU or masked_rnn or MaskedRNN"
run_pytest 4-masked-lstm "$T/backend_reference_test.py" "$T/masked_lstm_shape_inference_test.py" "$U" \
  --ignore="$U/test_rnn_docs.py" -k "$MASKED_LSTM"
run_pytest 5-masked-gru-rnn "$T/backend_reference_test.py" "$T/masked_gru_shape_inference_test.py" \
  "$T/masked_rnn_shape_inference_test.py" "$U" --ignore="$U/test_rnn_docs.py" -k "$MASKED_GRU_RNN"
# What holds for the series as a whole: the generated docs kept for review, the staleness check.
run_pytest all-series "$U" --ignore="$U/test_rnn_docs.py" -k "not ($MASKED_LSTM or $MASKED_GRU_RNN or scan)"
# onnx's own tests of what the series touch: LSTM/GRU/RNN, Scan, attention and the preview domain
# on the reference backend and evaluator; shape inference; the schema registry, function bodies
# and the checker, which every new schema goes through.
run_pytest onnx-rnn-scan-preview "$T/backend_reference_test.py" "$T/reference_evaluator_test.py" \
  -k "(lstm or gru or rnn or scan or attention or preview) and not ($MASKED_LSTM or $MASKED_GRU_RNN)"
run_pytest onnx-shape-inference "$T/shape_inference_test.py"
run_pytest onnx-schemas-functions-checker "$T/schema_test.py" "$T/function_test.py" \
  "$T/function_inference_test.py" "$T/checker_test.py"

step "done in $(($(date +%s) - START)) s"
RECORD_ARGS=()
if [[ -n "$RECORD" ]]; then
  COMMAND="bash upstream/check.sh"
  [[ -n "$SOURCE" ]] && COMMAND+=" --source DIR"
  [[ -z "$SOURCE" ]] && RECORD_ARGS+=(--base "$VERSION")
  RECORD_ARGS+=(--json "$RECORD" --command "$COMMAND --record ${RECORD#"$REPO"/}" --onnx "$DESCRIBED"
    --seconds "$(($(date +%s) - START))" --revision "${UPSTREAM_REVISION:-${REVISION:-unknown}}")
fi
PYTHONPATH="$REPO" "$VENV/bin/python" "$HERE/summarize.py" "${RECORD_ARGS[@]}" "${SUITES[@]}"
