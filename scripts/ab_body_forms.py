"""Which Scan body forms onnxruntime, OpenVINO and tract run, and how fast onnxruntime runs each
against the converters' ``Loop``, side by side in one run.

The body has to read the recurrent weights at every step. The forms measured:

- ``portable``: the package's body, weights as pass-through Scan state (onnxruntime copies every
  state output into a fresh buffer at each step, so it copies the weights every step);
- ``capture``: the package's body reading the weights from the enclosing graph (no copy);
- ``capture-raw``: the body reads the node's own weight inputs (``R``; ``P``, ``B`` where the step
  uses them) from the enclosing graph and takes its weights from them itself (the
  ``Gather``/``Split``/``Concat``/``Transpose`` the other forms do before the Scan are cloned into
  the body). With constant weights (initializers) onnxruntime folds those nodes out of the body,
  and OpenVINO's ONNX frontend accepts the read because it hands a body an outer ``Constant``
  itself (``Subgraph::get_ov_node_from_cache``); an outer value that is not a ``Constant`` it
  rejects, and with weights given as graph inputs onnxruntime runs those nodes at every step;
- ``loop``: the ``Loop`` a converter emits today (``onnx-masked-rnn bench``'s ``loop (converter)``):
  ``Gather`` of step ``t`` inside the body, weights read from the enclosing graph;
- ``chunked-K``: a prototype of the portable form that carries less per step: the Scan runs over
  chunks of K steps (the projections and the mask padded with masked steps to a multiple of K,
  which changes nothing), its body unrolled K times, so the weights are copied once per K steps.

For each form, every runtime runs a small model and its ``Y`` is compared with the reference
(``ok``, ``wrong`` or the line of the error that says why), twice: with the weights ``W``, ``R``,
``B`` as graph inputs (``acceptance``) and as initializers (``acceptance_initializers``, as
``bench`` times them). Then onnxruntime times every form on ``bench``'s LSTM workload (its default
shapes, masks, 1 and 2 threads; weights as initializers), interleaved with the order rotating,
median of ``--repeat`` runs after warm-up, each as a ratio to the ``Loop``. Writes
``docs/results/body_forms.json``: ``python scripts/ab_body_forms.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import re
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import onnx.inliner
import onnx_ir as ir
import onnx_ir.passes.common
from onnxscript import build_function

from onnx_masked_rnn import DOMAIN, bench, functions, record, testing
from onnx_masked_rnn.conformance.backends import OpenVINOBackend, TractBackend
from onnx_masked_rnn.functions.cells import constant
from onnx_masked_rnn.inline import inline
from onnx_masked_rnn.reference import FUNCTIONS

ROOT = Path(__file__).resolve().parents[1]
FORMS = ("portable", "capture", "capture-raw", "loop", "chunked-8", "chunked-16")
THREADS = (1, 2)


def chunked_scan(K: int):
    """``functions.masked_scan``'s signature, over chunks of ``K`` steps (portable weights)."""

    def masked_scan(op, cell, initial_state, m, *, reverse, masked_output, zero_initial_h, form, dtype, d):
        i64 = ir.DataType.INT64
        carry_y = masked_output == "carry" and not zero_initial_h

        def typed(name, rank, element=dtype):
            return ir.Value(name=name, type=ir.TensorType(element), shape=ir.Shape([None] * rank))

        T = op.Shape(cell.projections[0][0], start=0, end=1)
        k = constant(op, [K], i64)
        pad = op.Mod(op.Sub(k, op.Mod(T, k)), k)

        def chunks(v, element):  # [T, N, c] -> [ceil(T/K), K, N, c], padded with zeros (false)
            fill = op.ConstantOfShape(
                op.Concat(pad, op.Shape(v, start=1), axis=0), value=ir.tensor(np.zeros(1, element.numpy()))
            )
            return op.Reshape(
                op.Concat(v, fill, axis=0),
                op.Concat(constant(op, [-1, K], i64), op.Shape(v, start=1), axis=0),
            )

        if m is None:
            N = op.Shape(cell.projections[0][0], start=1, end=2)
            m = op.ConstantOfShape(op.Concat(T, N, constant(op, [1], i64), axis=0), value=ir.tensor([True]))
        states = ("h", "c")[: len(initial_state)]
        weights = [(name, rank) for _, name, rank in cell.weights]
        inputs = (
            [typed(f"{s}_prev", 2) for s in states]
            + [typed("y_prev", 2)] * carry_y
            + [typed(n, r) for n, r in weights]
            + [typed(f"{n}_k", 3) for _, n in cell.projections]
            + [typed("m_k", 3, ir.DataType.BOOL)]
        )
        outputs = (
            [typed(f"{s}_next", 2) for s in states]
            + [typed("y_next", 2)] * carry_y
            + [typed(f"{n}_next", r) for n, r in weights]
            + [typed("y_k", 3)]
        )

        def step(op, *values):
            values = list(values)
            state = [values.pop(0) for _ in states]
            y_prev = values.pop(0) if carry_y else None
            w = [values.pop(0) for _ in weights]
            xk = [values.pop(0) for _ in cell.projections]
            mk = values.pop(0)
            ys = [None] * K
            for j in range(K - 1, -1, -1) if reverse else range(K):
                jj = constant(op, j, i64)
                m_t = op.Gather(mk, jj, axis=0)
                new = cell.step(op, [op.Gather(x, jj, axis=0) for x in xk], w, state)
                state = [op.Where(m_t, n, s) for n, s in zip(new, state)]
                if masked_output == "zero":
                    y = op.Where(m_t, new[0], constant(op, 0.0, dtype))
                elif carry_y:
                    y = y_prev = op.Where(m_t, new[0], y_prev)
                else:
                    y = state[0]
                ys[j] = op.Unsqueeze(y, constant(op, [0], i64))
            kept = [op.Identity(v) for v in [*state, *([y_prev] if carry_y else []), *w]]
            return [*kept, op.Concat(*ys, axis=0)]

        body = op.builder.subgraph(step, inputs, outputs, name=f"step_{d}")
        initial_y = []
        if carry_y:
            zeros = ir.tensor(np.zeros(1, dtype=dtype.numpy()))
            initial_y = [op.ConstantOfShape(op.Shape(initial_state[0]), value=zeros)]
        scan_inputs = [chunks(v, dtype) for v, _ in cell.projections] + [chunks(m, ir.DataType.BOOL)]
        names = [f"{s}_last_{d}" for s in states] + [f"y_last_{d}"] * carry_y
        names += [f"{n}_last_{d}" for n, _ in weights] + [f"Yk_{d}"]
        results = op.Scan(
            *initial_state,
            *initial_y,
            *[v for v, _, _ in cell.weights],
            *scan_inputs,
            body=body,
            num_scan_inputs=len(scan_inputs),
            scan_input_directions=[int(reverse)] * len(scan_inputs),
            scan_output_directions=[int(reverse)],
            _outputs=names,
        )
        Y = op.Reshape(
            results[-1], op.Concat(constant(op, [-1], i64), op.Shape(results[-1], start=2), axis=0)
        )
        Y = op.Slice(Y, constant(op, [0], i64), T, constant(op, [0], i64))
        return op.Unsqueeze(Y, constant(op, [1], i64)), list(results[: len(states)])

    return masked_scan


def raw_capture_scan():
    """``functions.masked_scan`` in the capture form, the body deriving its weights from the
    node's inputs itself: each weight's producers in the enclosing graph, back to the function's
    inputs, are rebuilt inside the body."""
    masked_scan = functions.masked_scan

    def rebuild(op, values: list[ir.Value]) -> list[ir.Value]:
        made: dict[ir.Value, ir.Value] = {}

        def clone(value: ir.Value | None) -> ir.Value | None:
            if value is not None and value.producer() is None and value.const_value is not None:
                return op.Constant(value=value.const_value)  # the builder's constants: in the body
            if value is None or value.producer() is None:  # a function input: read from outside
                return value
            if value not in made:
                node = value.producer()
                outputs = getattr(op, node.op_type)(
                    *[clone(v) for v in node.inputs],
                    _outputs=len(node.outputs),
                    **{name: attr.value for name, attr in node.attributes.items()},
                )
                outputs = [outputs] if isinstance(outputs, ir.Value) else list(outputs)
                made.update(zip(node.outputs, outputs))
            return made[value]

        return [clone(v) for v in values]

    def scan(op, cell, initial_state, m, *, form, **kw):
        def step(body, xs, weights, state):
            return cell.step(body, xs, rebuild(body, [w for w, _, _ in cell.weights]), state)

        return masked_scan(op, dataclasses.replace(cell, step=step), initial_state, m, form="capture", **kw)

    return scan


def model_of(form: str, attrs, inputs: dict) -> onnx.ModelProto:
    """The masked node of ``bench``'s workload in ``form``, standard ops only."""
    if form == "loop":
        return bench.loop_model(attrs.op_type.removeprefix("Masked"), attrs, inputs)
    model = testing.make_model(attrs, inputs, bench.OPSET)
    if form in ("portable", "capture"):
        return inline(model, "scan", scan_form=form)

    (node,) = model.graph.node
    config = functions.Configuration.of(
        attrs, [n for n in node.input[3:] if n], onnx.TensorProto.FLOAT, len(node.output)
    )
    scan = raw_capture_scan() if form == "capture-raw" else chunked_scan(int(form.split("-")[1]))
    with mock.patch.object(functions, "masked_scan", scan):
        function = build_function(
            lambda op, *values: functions.op_body(op, config, "portable", *values),
            functions.formal_inputs(config),
            domain=DOMAIN,
            name=attrs.op_type,
            opset_imports={"": bench.OPSET},
        )
    ir.passes.common.RemoveUnusedNodesPass()(ir.Model(function.graph, ir_version=10))
    model.functions.append(functions.to_function_proto(function, config, form))
    return onnx.inliner.inline_local_functions(model)


def acceptance(form: str, initializers: bool = False) -> dict[str, str]:
    """What onnxruntime, OpenVINO and tract make of ``form`` on a small case, its weights graph
    inputs or (``initializers``) initializers."""
    case = bench.Case("LSTM", (20, 3, 4, 8), "holes", 1)
    attrs, inputs = bench.workload(case)
    expected = FUNCTIONS[attrs.op_type](**inputs, **attrs.to_onnx())[0]
    model = model_of(form, attrs, inputs)
    if initializers:
        model = bench.with_initializers(model, inputs, weights_of(model))
    feeds = [inputs[i.name] for i in model.graph.input]
    outcome = {}
    runners = {
        "onnxruntime": lambda: bench.session(model, 1).run(
            ["Y"], dict(zip([i.name for i in model.graph.input], feeds))
        )[0],
        "openvino": lambda: OpenVINOBackend.prepare(model).run(feeds)[0],
        "tract": lambda: TractBackend.prepare(model).run(feeds)[0],
    }
    for runtime, run in runners.items():
        try:
            y = np.asarray(run()).reshape(expected.shape)
            outcome[runtime] = "ok" if np.allclose(y, expected, rtol=1e-4, atol=1e-5) else "wrong"
        except Exception as error:  # a runtime's refusal is the measurement
            outcome[runtime] = "error: " + reason(error)
    return outcome


WRAPPING = re.compile(
    r"Exception from |Check '|FrontEnd API failed|Model wasn't|-- |While validating|Summary"
)


def reason(error: Exception) -> str:
    """The line of ``error``'s message that says why (OpenVINO wraps it in lines of context)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    telling = [line for line in lines if not WRAPPING.match(line)]
    return ((telling or lines) or [type(error).__name__])[0][:200]


def weights_of(model: onnx.ModelProto) -> list[str]:
    return [w for w in ("W", "R", "B") if any(i.name == w for i in model.graph.input)]


def timings(repeat: int, warmup: int) -> list[dict]:
    rows = []
    for shape, mask, threads in itertools.product(bench.DEFAULT_SHAPES, bench.DEFAULT_MASKS, THREADS):
        case = bench.Case("LSTM", shape, mask, threads)
        attrs, inputs = bench.workload(case)
        expected = FUNCTIONS[attrs.op_type](**inputs, **attrs.to_onnx())[0]
        runs = {}
        for form in FORMS:
            model = model_of(form, attrs, inputs)
            model = bench.with_initializers(model, inputs, weights_of(model))
            session = bench.session(model, threads)
            feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
            y = session.run(["Y"], feeds)[0]
            if not np.allclose(y, expected, rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{form} differs from the reference on {case.key}")
            runs[form] = (session, feeds)
        times = {form: [] for form in FORMS}
        for r in range(warmup + repeat):
            order = FORMS[r % len(FORMS) :] + FORMS[: r % len(FORMS)]
            for form in order:
                session, feeds = runs[form]
                start = time.perf_counter()
                session.run(["Y"], feeds)
                if r >= warmup:
                    times[form].append(time.perf_counter() - start)
        medians = {form: statistics.median(v) for form, v in times.items()}
        row = {"shape": list(shape), "mask": mask, "threads": threads, "median_s": medians}
        row["ratio_to_loop"] = {form: medians[form] / medians["loop"] for form in FORMS}
        rows.append(row)
        print(
            f"{case.key:32s}",
            "  ".join(f"{form} {row['ratio_to_loop'][form]:.2f}x" for form in FORMS),
            f"(loop {medians['loop'] * 1e3:.1f} ms)",
            flush=True,
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", default=str(ROOT / "docs" / "results" / "body_forms.json"))
    args = parser.parse_args()
    header = record.start("body_forms", packages=("openvino", "tract"))
    with contextlib.redirect_stderr(sys.stdout):
        accepted = {form: acceptance(form) for form in FORMS}
        constant = {form: acceptance(form, initializers=True) for form in FORMS}
    for title, table in (("weights as inputs", accepted), ("weights as initializers", constant)):
        print(title)
        for form, outcome in table.items():
            print(f"  {form:12s}", "  ".join(f"{rt}: {o}" for rt, o in outcome.items()))
    rows = timings(args.repeat, args.warmup)
    result = record.finish(
        header, forms=list(FORMS), acceptance=accepted, acceptance_initializers=constant, timings=rows
    )
    record.write(result, args.json)
    worst = {form: max(r["ratio_to_loop"][form] for r in rows) for form in FORMS}
    print("worst ratio to the Loop:", "  ".join(f"{form} {v:.2f}x" for form, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
