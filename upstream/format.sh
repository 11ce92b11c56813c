#!/usr/bin/env bash
# Formats the C++ sources the series adds (upstream/onnx/**/*.h, *.cc) with onnx's pinned
# clang-format (22.1.8, from the package index) and onnx's style; with --check, changes nothing and
# exits 1 listing the files it would change. check.sh runs `format.sh --check`.
#
# The sdist has no .clang-format: STYLE is onnx's .clang-format (main, f7546912) written as the
# options where it differs from Google's style; `check.sh --source DIR` checks that it formats like
# the tree's own .clang-format.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${ONNX_UPSTREAM_CACHE:-$HOME/.cache/onnx-masked-rnn-upstream}"
PYTHON="${PYTHON:-python3.11}"
VERSION=22.1.8
STYLE="{BasedOnStyle: Google, AlignAfterOpenBracket: AlwaysBreak, AlignConsecutiveAssignments: false, \
AlignConsecutiveDeclarations: false, AlignOperands: false, AlignTrailingComments: false, \
AllowAllParametersOfDeclarationOnNextLine: false, AllowShortFunctionsOnASingleLine: Empty, \
AllowShortIfStatementsOnASingleLine: false, AllowShortLoopsOnASingleLine: false, BinPackArguments: false, \
BinPackParameters: false, BreakStringLiterals: false, ColumnLimit: 120, \
ForEachMacros: [FOR_EACH_RANGE, FOR_EACH, BOOST_FOREACH], IncludeIsMainRegex: '(Test)?\$', \
ObjCSpaceBeforeProtocolList: false, SpacesBeforeTrailingComments: 1, \
StatementMacros: [define_data, ONNX_ASSERT, ONNX_ASSERTM, TENSOR_ASSERTM]}"

VENV="$CACHE/lint-venv"
if [[ ! -x "$VENV/bin/clang-format" ]] || [[ "$("$VENV/bin/clang-format" --version)" != *" $VERSION"* ]]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "clang-format==$VERSION"
fi
if [[ "${1:-}" == "--print-style" ]]; then
  echo "$STYLE"
  exit 0
fi

mapfile -t FILES < <(find "$HERE/onnx" -name '*.h' -o -name '*.cc' | sort)
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for file in "${FILES[@]}"; do
    "$VENV/bin/clang-format" --style="$STYLE" "$file" | cmp -s - "$file" || bad+=("${file#"$HERE/"}")
  done
  if ((${#bad[@]})); then
    echo "clang-format $VERSION would change: ${bad[*]} (run bash upstream/format.sh)" >&2
    exit 1
  fi
  echo "clang-format $VERSION: ${#FILES[@]} files formatted"
else
  "$VENV/bin/clang-format" --style="$STYLE" -i "${FILES[@]}"
fi
