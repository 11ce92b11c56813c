"""The suite on onnxruntime (graph optimizations on and off), OpenVINO and tract matches the
known-limitations list exactly, and every runtime defect the list names still reproduces with its
plain-ONNX repro. A new failure, a case that now passes, a changed outcome or a fixed defect
fails a test: update ``known_limitations.json`` (``python -m onnx_masked_rnn.conformance.limitations``)
and ``docs/runtimes.md`` then."""

from __future__ import annotations

import pytest

from onnx_masked_rnn.conformance import limitations
from onnx_masked_rnn.conformance.case import compare
from onnx_masked_rnn.conformance.defects import DEFECTS, reproduce
from onnx_masked_rnn.conformance.worker import run_plan

KNOWN = limitations.load()


@pytest.fixture(scope="module")
def results() -> dict:
    """The checked variants of the shipped suite on the four runtimes, all at once (one worker
    process per runtime)."""
    return run_plan(limitations.plan())


@pytest.mark.parametrize("backend", list(limitations.CHECKED))
def test_suite_matches_the_known_limitations(results: dict, backend: str) -> None:
    listed = {case: entry["status"] for case, entry in KNOWN["backends"][backend].items()}
    seen = limitations.observed({backend: results[backend]})[backend]
    details = dict(results[backend])
    new = {
        case: f"{status}: {details[case].detail}"
        for case, status in seen.items()
        if listed.get(case) != status
    }
    fixed = {case: status for case, status in listed.items() if case not in seen}
    measured_with = KNOWN["versions"]
    assert not new and not fixed, (
        f"{backend} ({limitations.versions()}; the list was measured with {measured_with}): "
        f"not as listed: {new}; listed but now passing: {fixed}"
    )


@pytest.mark.parametrize("backend", list(limitations.CHECKED))
def test_each_listed_case_is_explained_by_its_defects(results: dict, backend: str) -> None:
    """The defects the list names for a case are the ones whose signature (outcome, message,
    model) matches what the case did."""
    wrong = {}
    for case, outcome in results[backend]:
        entry = KNOWN["backends"][backend].get(case)
        if entry and entry["status"] == outcome.status:
            explained = limitations.explain(backend, case, outcome)
            if explained != entry["defects"] or not explained:
                wrong[case] = (entry["defects"], explained)
    assert not wrong, wrong


def test_the_list_names_defects_that_exist_and_uses_them() -> None:
    used = {d for cases in KNOWN["backends"].values() for entry in cases.values() for d in entry["defects"]}
    assert used <= set(DEFECTS), used - set(DEFECTS)
    # a defect no case shows is kept only with the reason (how the package's graphs avoid it)
    unused = {key for key, defect in DEFECTS.items() if key not in used and not defect.workaround}
    assert not unused, f"no listed case shows {unused}: remove them or list their cases"
    assert KNOWN["checked"] == {b: list(v) for b, v in limitations.CHECKED.items()}


def test_the_list_covers_every_variant_on_every_runtime() -> None:
    """Each runtime's masked node, Scan expansion and native expansion are measured and checked,
    including the cells where a runtime lacks what the variant needs (OpenVINO and tract on the
    masked node, tract on the native expansion), and each cell counts every case of its variant."""
    cases = limitations.plan()
    for backend in ("onnxruntime", "onnxruntime-noopt", "openvino", "tract"):
        assert KNOWN["checked"][backend] == ["base", "expanded", "native"], backend
        for variant in ("base", "expanded", "native"):
            total = sum(limitations.variant_of(c.name) == variant for c in cases[backend])
            assert total and sum(KNOWN["counts"][backend][variant].values()) == total, (backend, variant)


REPROS = [(key, backend) for key, d in DEFECTS.items() for backend in d.backends]


@pytest.mark.parametrize(("key", "backend"), REPROS, ids=[f"{k}-{b}" for k, b in REPROS])
def test_each_runtime_defect_reproduces(key: str, backend: str) -> None:
    """The repro shows the defect on the runtime (same outcome, same message) and passes on a
    witness backend, so the model and its expected outputs are right."""
    from onnx_masked_rnn.conformance.backends import resolve

    defect = DEFECTS[key]
    repro = defect.repro()
    outcome = reproduce(key, backend)
    assert defect.explains(backend, outcome, repro.model, repro.inputs), (key, backend, outcome)
    witness = compare(
        resolve(defect.witness), repro.model, [(repro.inputs, repro.expected)], repro.rtol, repro.atol
    )
    assert witness.status == "passed", (defect.witness, witness)


def test_openvino_takes_a_scan_body_reading_an_outer_constant() -> None:
    """``openvino-scan-outer-scope-read`` is about outer values that are not constants: the same
    repro with the value an initializer instead of a graph input is imported and compiled (the
    frontend hands the body the Constant itself), as ``scripts/ab_body_forms.py``'s capture-raw
    form relies on."""
    import onnx

    from onnx_masked_rnn.conformance.backends import OpenVINOBackend

    repro = DEFECTS["openvino-scan-outer-scope-read"].repro()
    model = onnx.ModelProto()
    model.CopyFrom(repro.model)
    (w,) = [i for i in model.graph.input if i.name == "w"]
    model.graph.input.remove(w)
    model.graph.initializer.append(onnx.numpy_helper.from_array(repro.inputs[-1], "w"))
    with pytest.raises(Exception, match=DEFECTS["openvino-scan-outer-scope-read"].message):
        OpenVINOBackend.prepare(repro.model)
    OpenVINOBackend.prepare(model)  # no error
