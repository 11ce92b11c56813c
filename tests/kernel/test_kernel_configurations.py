"""Every configuration family of the specification on the native kernel, against the numpy
reference: directions, layouts, modes, masks, sequence_lens, states, peepholes, clip,
input_forget, linear_before_reset, the eleven activations with and without alpha/beta, absent
outputs, empty batch or sequence, the recurrent product's shapes, NaN at masked steps,
float16/bfloat16/float64. Each job runs in a child process (``kernel_cases``), so a crash fails
its family instead of killing pytest."""

from __future__ import annotations

from pathlib import Path

import kernel_cases
import pytest
from kernel_cases import Job, job

from onnx_masked_rnn._worker import Crash, Worker
from onnx_masked_rnn.attributes import ACTIVATIONS, DIRECTIONS, MASKED_OUTPUT_MODES
from onnx_masked_rnn.testing import MASK_KINDS

OPS = ("LSTM", "GRU", "RNN")
NUM_ACTIVATIONS = {"LSTM": 3, "GRU": 2, "RNN": 1}


def _activation_jobs() -> list[Job]:
    """Each activation in each position of each op, with alpha/beta given (non-default values)
    and omitted (the defaults); bidirectional, so the second direction's list is read too."""
    jobs = []
    names = list(ACTIVATIONS)
    for op in OPS:
        k = NUM_ACTIVATIONS[op]
        for i in range(len(names)):
            for explicit in (False, True):
                forward = [names[(i + j) % len(names)] for j in range(k)]
                backward = [names[(i + j + 5) % len(names)] for j in range(k)]
                attributes: dict = {"direction": "bidirectional", "activations": forward + backward}
                if explicit:
                    chosen = forward + backward
                    alphas = [0.3 + 0.1 * j for j, a in enumerate(chosen) if ACTIVATIONS[a][0]]
                    betas = [0.4 + 0.05 * j for j, a in enumerate(chosen) if ACTIVATIONS[a][1]]
                    if alphas:
                        attributes["activation_alpha"] = alphas
                    if betas:
                        attributes["activation_beta"] = betas
                jobs.append(job(op, attributes=attributes, seed=i))
    return jobs


FAMILIES: dict[str, list[Job]] = {
    "directions x layouts x modes": [
        job(op, attributes={"direction": d, "layout": layout, "masked_output": mode})
        for op in OPS
        for d in DIRECTIONS
        for layout in (0, 1)
        for mode in MASKED_OUTPUT_MODES
    ],
    "masks": [
        job(op, mask_kind=kind, attributes={"direction": "bidirectional", "masked_output": mode})
        for op in OPS
        for kind in MASK_KINDS
        for mode in MASKED_OUTPUT_MODES
    ]
    + [job(op, present=("B", "initial_h", "initial_c", "P")) for op in OPS],
    "sequence_lens": [
        job(op, sequence_lens=lens, present=present, attributes={"direction": d, "masked_output": "carry"})
        for op in OPS
        for lens in ("random", "with_zero")
        for present in (("B", "initial_h", "initial_c"), ("B", "initial_h", "initial_c", "mask"))
        for d in ("forward", "bidirectional")
    ],
    "initial states": [
        job(op, present=present, attributes={"direction": "bidirectional"})
        for op in OPS
        for present in (
            ("mask",),
            ("initial_h", "mask"),
            ("initial_c", "mask"),
            ("initial_h", "initial_c", "mask"),
        )
        if op == "LSTM" or "initial_c" not in present
    ],
    "peepholes": [
        job("LSTM", present=present, attributes={"direction": d})
        for d in DIRECTIONS
        for present in (("B", "P", "mask"), ("P", "mask"), ("initial_h", "initial_c", "P", "mask"))
    ],
    "clip": [
        job(op, weight_scale=4.0, attributes={"clip": clip, "direction": "bidirectional"})
        for op in OPS
        for clip in (0.25, 1.5)
    ],
    "input_forget": [
        job("LSTM", attributes={"input_forget": 1, "direction": d, "masked_output": m})
        for d in DIRECTIONS
        for m in MASKED_OUTPUT_MODES
    ],
    "linear_before_reset": [
        job("GRU", attributes={"linear_before_reset": lbr, "direction": d, "layout": layout})
        for lbr in (0, 1)
        for d in DIRECTIONS
        for layout in (0, 1)
    ],
    "activations": _activation_jobs(),
    "outputs absent": [
        job(op, outputs=outputs, attributes={"direction": "bidirectional", "masked_output": "carry"})
        for op in OPS
        for outputs in (("Y",), ("", "Y_h"), ("Y", "Y_h"), ("", "", "Y_c"), ("Y", "", "Y_c"))
        if op == "LSTM" or len(outputs) <= 2
    ],
    "empty batch or sequence": [
        job(
            op,
            shape=shape,
            attributes={"direction": d, "layout": layout},
            sequence_lens=lens,
            mask_kind="holes" if shape[0] else "all_true",  # the mask kinds need a step
        )
        for op in OPS
        for shape in ((0, 3, 4, 6), (5, 0, 4, 6), (0, 0, 4, 6))
        for d in ("forward", "bidirectional")
        for layout in (0, 1)
        for lens in ("none", "random")
    ],
    "NaN at masked steps": [
        job(op, nan_at_masked_steps=True, sequence_lens=lens, attributes={"direction": d, "masked_output": m})
        for op in OPS
        for d in DIRECTIONS
        for m in MASKED_OUTPUT_MODES
        for lens in ("none", "with_zero")
    ],
    "float16, bfloat16, float64": [
        job(op, dtype=dtype, attributes={"direction": d, "layout": layout, "masked_output": "carry"})
        for op in OPS
        for dtype in ("float16", "bfloat16", "float64")
        for d in ("forward", "bidirectional")
        for layout in (0, 1)
    ]
    + [
        job(op, dtype=dtype, sequence_lens="with_zero", nan_at_masked_steps=True, attributes={"clip": 2.0})
        for op in OPS
        for dtype in ("float16", "bfloat16", "float64")
    ],
    # the packed recurrent product (kernel/packed_gemm.cc): every count of rows left over by its
    # blocks (batch 1 to 17), hidden sizes whose gate columns end inside a panel, one panel or many
    "recurrent product shapes": [
        job(op, shape=(3, n, 5, (1, 7, 31, 33, 65, 97)[n % 6]), attributes={"direction": "bidirectional"})
        for op in OPS
        for n in range(1, 18)
    ],
    # 150 steps: the input projections made 64 steps at a time where a step's rows run together
    # (batch 1; with onnxruntime's Gemm, every batch), whole where ranges of rows run apart
    "larger sizes": [
        job(op, shape=shape, attributes={"direction": "bidirectional", "masked_output": m}, mask_kind=kind)
        for op in OPS
        for shape in ((17, 9, 33, 40), (3, 70, 5, 130), (150, 1, 6, 12), (150, 3, 6, 12))
        for m in MASKED_OUTPUT_MODES
        for kind in ("right_padded", "holes")
    ],
}


# The recurrent product: the packed one on the widest instruction set the CPU has (auto), the
# AVX2 one (every x86-64 CPU with AVX-512 has AVX2 too), and onnxruntime's Gemm (runtime).
PRODUCTS = ("auto", "avx2", "runtime")


@pytest.fixture(scope="module", params=PRODUCTS)
def worker(request):
    if request.param == "avx2" and not _has_avx2():
        pytest.skip("this CPU has no AVX2 with FMA, so the kernel's AVX2 product cannot run here")
    slot = Worker(
        kernel_cases.setup,
        None,
        120.0,
        name="the kernel's process",
        environment={"ONNX_MASKED_RNN_KERNEL_PRODUCT": request.param},
    )
    yield slot
    slot.close()


def _has_avx2() -> bool:
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    return "avx2" in flags and "fma" in flags


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_matches_the_reference(worker, family):
    failures = []
    for one in FAMILIES[family]:
        outcome = worker.run(one)
        if isinstance(outcome, Crash):
            failures.append(f"{one.label()}: CRASH {outcome.detail}")
        elif outcome is not None:
            failures.append(f"{one.label()}: {outcome}")
    assert not failures, f"{len(failures)} of {len(FAMILIES[family])} differ:\n" + "\n".join(failures)


def test_the_families_cover_every_attribute_value():
    jobs = [j for family in FAMILIES.values() for j in family]
    attributes = [dict(j.attributes) for j in jobs]
    assert {a.get("direction", "forward") for a in attributes} == set(DIRECTIONS)
    assert {a.get("layout", 0) for a in attributes} == {0, 1}
    assert {a.get("masked_output", "zero") for a in attributes} == set(MASKED_OUTPUT_MODES)
    assert {name for a in attributes for name in a.get("activations", ())} == set(ACTIVATIONS)
    assert {j.mask_kind for j in jobs} == set(MASK_KINDS)
    assert {j.dtype for j in jobs} == {"float16", "bfloat16", "float32", "float64"}
    assert {(j.op, j.shape[0] == 0 or j.shape[1] == 0) for j in jobs} == {
        (op, e) for op in OPS for e in (0, 1)
    }


@pytest.mark.parametrize(
    ("value", "says"),
    [("avx9", "not one of auto, avx512, avx2, runtime"), ("Avx2", "not one of auto, avx512, avx2, runtime")],
)
def test_a_bad_product_choice_is_an_error_naming_the_variable(value, says):
    slot = Worker(
        kernel_cases.setup,
        None,
        120.0,
        name="the kernel's process",
        environment={"ONNX_MASKED_RNN_KERNEL_PRODUCT": value},
    )
    try:
        outcome = slot.run(FAMILIES["recurrent product shapes"][0])
    finally:
        slot.close()
    assert isinstance(outcome, str) and f"ONNX_MASKED_RNN_KERNEL_PRODUCT={value}: {says}" in outcome, outcome
