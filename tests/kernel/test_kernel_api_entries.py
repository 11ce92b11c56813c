"""Every ``OrtApi`` entry the kernel declares (``kernel/ort_api.h``, by its position in the table)
is called at least once by a conformance run on the kernel plus its run-time errors, in a child
process: a wrong position crashes that process, which is then this test's failure.

The library counts its calls per entry; ``OnnxMaskedRnnKernelApiCalls(buf, n)`` writes them as
``Name count`` lines and returns the length it needs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HEADER = Path(__file__).resolve().parents[2] / "kernel" / "ort_api.h"

CHILD = r"""
import ctypes, gc, json, sys
from onnx_masked_rnn import kernel
from onnx_masked_rnn.conformance import DATA_DIR
from onnx_masked_rnn.conformance.case import run_case
from onnx_masked_rnn.conformance.backends import OnnxRuntimeKernelBackend
from onnx_masked_rnn.conformance.suite import load_cases, variant_of
sys.path.insert(0, sys.argv[1])
import kernel_cases

statuses = {}
for case in load_cases(DATA_DIR):
    if variant_of(case.name) == "base":
        statuses[case.name] = run_case(OnnxRuntimeKernelBackend, case).status
# a batch split into chunks of rows (KernelContext_ParallelFor), on two intra-op threads
for op in ("LSTM", "GRU", "RNN"):
    assert kernel_cases.thread_counts_agree(kernel_cases.job(op, shape=(3, 40, 4, 64))) is None
# the error statuses: a mask of the wrong shape, sequence_lens out of range
job = kernel_cases.job("LSTM", present=("B", "mask"), sequence_lens="random")
values = kernel_cases.inputs_of(job)
session = kernel_cases.kernel_session(kernel_cases.model_of(job, values, dynamic=True))
errors = []
for name, value in (("mask", values["mask"].T.copy()), ("sequence_lens", values["sequence_lens"] + 99)):
    try:
        session.run(None, {**values, name: value})
    except Exception as error:
        errors.append(str(error))
del session  # its kernels' destructors release what they made
gc.collect()
library = ctypes.CDLL(kernel.library_path())
library.OnnxMaskedRnnKernelApiCalls.restype = ctypes.c_size_t
library.OnnxMaskedRnnKernelApiCalls.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
size = library.OnnxMaskedRnnKernelApiCalls(None, 0)
buffer = ctypes.create_string_buffer(size + 1)
library.OnnxMaskedRnnKernelApiCalls(buffer, size + 1)
counts = dict(line.split() for line in buffer.value.decode().splitlines() if line.strip())
print(json.dumps({"statuses": statuses, "errors": errors, "counts": {k: int(v) for k, v in counts.items()}}))
"""


def declared_entries() -> dict[str, int]:
    """``{name: index}`` of the header's ``OMR_ORT_API(name, index, ...)`` lines."""
    text = HEADER.read_text()
    body = text[text.index("#define OMR_ORT_API_ENTRIES") :]
    body = body[: body.index("\n\n")]
    return {name: int(index) for name, index in re.findall(r"OMR_ORT_API\((\w+),\s*(\d+),", body)}


def test_the_header_declares_entries_by_unique_position():
    entries = declared_entries()
    assert len(entries) > 10
    assert len(set(entries.values())) == len(entries)


def test_every_declared_entry_is_called_in_a_child_process():
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(Path(__file__).resolve().parents[1])],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"the child died ({done.returncode}): {done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result["statuses"].values()) == {"passed"}, result["statuses"]
    assert len(result["errors"]) == 2
    entries = declared_entries()
    assert set(result["counts"]) == set(entries), "the library counts other entries than the header declares"
    uncalled = sorted(name for name in entries if result["counts"][name] == 0)
    assert not uncalled, f"declared but never called: {uncalled}"
