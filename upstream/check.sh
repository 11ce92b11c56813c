#!/usr/bin/env bash
# Checks that upstream/patches is what upstream/series.py writes from the sources (upstream/onnx/,
# upstream/edits/, upstream/series.toml) and that each series applies on its own base, then applies
# every series in upstream/patches to onnx's source distribution, builds onnx, installs
# it into a fresh venv and runs onnx's tests for what the series touches, the new tests on onnx's
# reference and on onnxruntime, and the cross-checks against this package. Ends with one line
# "N passed, N failed"; exits non-zero on any failure.
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
SRC="$CACHE/src"  # fixed path: ccache hits need the same paths on every run
RESULTS="$CACHE/results"
START=$(date +%s)

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

step "git repository of the sdist + git am upstream/patches/*/"
rm -rf "$SRC" && mkdir -p "$SRC"
tar xzf "$SDIST" -C "$SRC" --strip-components=1
GIT=(git -C "$SRC" -c user.name="onnx-masked-rnn upstream check" -c user.email="upstream-check@localhost"
  -c commit.gpgsign=false)
"${GIT[@]}" init -q
"${GIT[@]}" add -A
GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
  "${GIT[@]}" commit -q -m "onnx $VERSION (source distribution)"
"${GIT[@]}" am -q "$HERE"/patches/*/*.patch
"${GIT[@]}" log --oneline | cat

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

step "fresh test venv"
VENV="$CACHE/test-venv"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# The package's own dependencies at the versions this repository is tested with, then the patched
# onnx over whatever onnx they pulled in.
"${PIP[@]}" numpy==2.4.6 onnxruntime==1.32.0 onnxscript==0.7.2 onnx_ir==1.1.0 ml_dtypes \
  pytest parameterized pillow
"${PIP[@]}" --no-deps --force-reinstall "$CACHE"/wheel/onnx-*.whl
"$VENV/bin/python" -c "import onnx, onnx.defs; print('onnx', onnx.__version__, onnx.__file__); \
  [onnx.defs.get_schema(op, 1, 'ai.onnx.preview') for op in ('MaskedLSTM', 'MaskedGRU', 'MaskedRNN')]"

step "docs regenerated with onnx's own tools (stat_coverage.py, gen_doc.py; the sdist has no docs/)"
(cd "$SRC" && mkdir -p docs && "$VENV/bin/python" onnx/backend/test/stat_coverage.py >"$RESULTS/docs.log" 2>&1 &&
  "$VENV/bin/python" onnx/defs/gen_doc.py >>"$RESULTS/docs.log" 2>&1) || { tail -20 "$RESULTS/docs.log"; }

SUITES=()
run_pytest() {  # name, then pytest arguments; run outside the source tree so onnx is the wheel
  local name=$1
  shift
  SUITES+=("$RESULTS/$name.xml")
  step "pytest: $name"
  (cd "$RESULTS" && PYTHONPATH="$SRC/tests/python:$REPO:$HERE/tests" ONNX_UPSTREAM_SRC="$SRC" \
    ALLOW_RELEASED_ONNX_OPSET_ONLY=0 \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider --color=no --import-mode=importlib -W ignore::RuntimeWarning \
    --junitxml="$RESULTS/$name.xml" "$@" 2>&1 | tail -5) || true
}

# onnx's reference backend on the new node tests (base and expanded) and onnx's own tests of the
# operators and files the series touches: LSTM/GRU/RNN, Scan, the preview domain, shape inference.
run_pytest backend_reference "$SRC/tests/python/backend_reference_test.py" \
  -k "masked or lstm or gru or rnn or scan or flexattention"
run_pytest shape_inference "$SRC/tests/python/shape_inference_test.py" \
  "$SRC"/tests/python/masked_*_shape_inference_test.py
run_pytest reference_evaluator "$SRC/tests/python/reference_evaluator_test.py" \
  -k "scan or lstm or gru or rnn or masked or preview"
# The schema registry, function bodies and checker, which every new schema goes through.
run_pytest schemas_and_functions "$SRC/tests/python/schema_test.py" "$SRC/tests/python/function_test.py" \
  "$SRC/tests/python/function_inference_test.py" "$SRC/tests/python/inliner_test.py" \
  "$SRC/tests/python/checker_test.py"
# onnxruntime on the same node tests, the cross-checks against this package, the generated docs.
run_pytest upstream "$HERE/tests"

step "done in $(($(date +%s) - START)) s"
"$VENV/bin/python" "$HERE/summarize.py" "${SUITES[@]}"
