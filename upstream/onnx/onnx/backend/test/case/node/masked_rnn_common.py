# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the node tests of MaskedLSTM, MaskedGRU and MaskedRNN share: inputs, masks, and the
expected outputs, computed by :func:`masked_recurrence`, a small numpy implementation of the
operators' text written for these tests (independent of ``onnx.reference``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import onnx
from onnx import helper
from onnx.backend.test.case.node import expect
from onnx.defs import AI_ONNX_PREVIEW_DOMAIN

# The tests' models import ai.onnx 22 (the function bodies are built at the model's opset).
OPSET_IMPORTS = [
    helper.make_opsetid("", 22),
    helper.make_opsetid(AI_ONNX_PREVIEW_DOMAIN, 1),
]
NUM_GATES = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}
# The inputs a node test reads unless it says otherwise: X, W, R, B, initial states and mask.
DEFAULT_INPUTS = {
    "MaskedLSTM": ["X", "W", "R", "B", "", "initial_h", "initial_c", "", "mask"],
    "MaskedGRU": ["X", "W", "R", "B", "", "initial_h", "mask"],
    "MaskedRNN": ["X", "W", "R", "B", "", "initial_h", "mask"],
}
OUTPUTS = {
    "MaskedLSTM": ["Y", "Y_h", "Y_c"],
    "MaskedGRU": ["Y", "Y_h"],
    "MaskedRNN": ["Y", "Y_h"],
}
DEFAULT_ACTIVATIONS = {
    "MaskedLSTM": ["Sigmoid", "Tanh", "Tanh"],
    "MaskedGRU": ["Sigmoid", "Tanh"],
    "MaskedRNN": ["Tanh"],
}

# name -> (function of x, alpha, beta; default alpha or None if it takes none; default beta or None)
ACTIVATIONS = {
    "relu": (lambda x, *_: np.maximum(x, 0), None, None),
    "tanh": (lambda x, *_: np.tanh(x), None, None),
    "sigmoid": (lambda x, *_: 1 / (1 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, *_: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, *_: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, *_: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None),
    "softsign": (lambda x, *_: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, *_: np.logaddexp(0, x), None, None),
}


def _activations(attrs: dict, op_type: str, num_directions: int) -> list[list]:
    """Each direction's functions as ``x -> f(x)``, their alpha and beta consumed in order."""
    names = attrs.get("activations") or DEFAULT_ACTIVATIONS[op_type] * num_directions
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    functions = []
    for name in names:
        f, alpha, beta = ACTIVATIONS[name.lower()]
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        functions.append(lambda x, f=f, a=alpha, b=beta: f(x, a, b))
    per_direction = len(DEFAULT_ACTIVATIONS[op_type])
    functions = functions[
        : per_direction * num_directions
    ]  # a forward RNN may list two
    return [
        functions[d * per_direction : (d + 1) * per_direction]
        for d in range(num_directions)
    ]


def _cell(op_type, attrs, acts, x, state, W, R, B, P):
    """One step of the ONNX cell of ``op_type``: the new (h, c) from ``x`` and ``state``."""
    h, c = state
    clip = attrs.get("clip")
    clipped = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    hidden = R.shape[-1]
    Wb, Rb = np.split(B, 2)
    if op_type == "MaskedRNN":
        return acts[0](clipped(x @ W.T + h @ R.T + Wb + Rb)), c
    if op_type == "MaskedGRU":
        f, g = acts
        W_zr, W_h = W[: 2 * hidden], W[2 * hidden :]
        R_zr, R_h = R[: 2 * hidden], R[2 * hidden :]
        zr = f(clipped(x @ W_zr.T + h @ R_zr.T + Wb[: 2 * hidden] + Rb[: 2 * hidden]))
        z, r = zr[:, :hidden], zr[:, hidden:]
        if attrs.get("linear_before_reset", 0):
            pre = x @ W_h.T + r * (h @ R_h.T + Rb[2 * hidden :]) + Wb[2 * hidden :]
        else:
            pre = x @ W_h.T + (r * h) @ R_h.T + Rb[2 * hidden :] + Wb[2 * hidden :]
        return (1 - z) * g(clipped(pre)) + z * h, c
    f, g, act_h = acts
    gates = x @ W.T + h @ R.T + Wb + Rb
    g_i, g_o, g_f, g_c = np.split(gates, 4, axis=-1)
    p_i, p_o, p_f = np.split(P, 3)
    i = f(clipped(g_i + p_i * c))
    forget = 1 - i if attrs.get("input_forget", 0) else f(clipped(g_f + p_f * c))
    c_new = forget * c + i * g(clipped(g_c))
    o = f(clipped(g_o + p_o * c_new))
    return o * act_h(c_new), c_new


def masked_recurrence(
    node: onnx.NodeProto, inputs: dict[str, np.ndarray]
) -> list[np.ndarray]:
    """The outputs of ``node`` on ``inputs``: per direction, in processing order, the cell's new
    state is kept where the effective mask ``m[t, b] = mask[t, b] and t < sequence_lens[b]`` is
    true and the old one elsewhere; Y is the new h there and 0 ("zero") or the previous Y of the
    direction ("carry") elsewhere. Computed in float64, rounded to X's type.
    """
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    attrs["activations"] = [a.decode() for a in attrs.get("activations", [])]
    op_type, layout = node.op_type, attrs.get("layout", 0)
    direction = attrs.get("direction", "forward")
    num_directions = 2 if direction == "bidirectional" else 1
    given = {name: inputs[name] for name in node.input if name}
    dtype = given["X"].dtype
    get = {
        k: np.asarray(v, dtype=np.float64)
        for k, v in given.items()
        if v.dtype.kind == "f"
    }
    X = get["X"].swapaxes(0, 1) if layout == 1 else get["X"]
    seq_length, batch_size = X.shape[:2]
    W, R = get["W"], get["R"]
    hidden = R.shape[-1]
    gates = NUM_GATES[op_type]
    B = get.get("B", np.zeros((num_directions, 2 * gates * hidden)))
    P = get.get("P", np.zeros((num_directions, 3 * hidden)))
    states = []
    for name in ("initial_h", "initial_c"):
        value = get.get(name, np.zeros((num_directions, batch_size, hidden)))
        states.append(value.swapaxes(0, 1) if layout == 1 and name in get else value)
    m = np.ones((seq_length, batch_size), dtype=bool)
    if "mask" in given:
        m &= given["mask"].T if layout == 1 else given["mask"]
    if "sequence_lens" in given:
        m &= np.arange(seq_length)[:, None] < given["sequence_lens"]
    acts = _activations(attrs, op_type, num_directions)
    carry = attrs.get("masked_output", "zero") == "carry"
    Y = np.zeros((seq_length, num_directions, batch_size, hidden))
    finals = []
    for d in range(num_directions):
        h, c = states[0][d], states[1][d]
        y = np.zeros((batch_size, hidden))
        reverse = direction == "reverse" or d == 1
        for t in reversed(range(seq_length)) if reverse else range(seq_length):
            h_new, c_new = _cell(
                op_type, attrs, acts[d], X[t], (h, c), W[d], R[d], B[d], P[d]
            )
            m_t = m[t][:, None]
            h, c = np.where(m_t, h_new, h), np.where(m_t, c_new, c)
            y = np.where(m_t, h_new, y if carry else 0)
            Y[t, d] = y
        finals.append((h, c))
    outputs = [Y, np.stack([f[0] for f in finals]), np.stack([f[1] for f in finals])]
    if layout == 1:
        outputs = [Y.transpose(2, 0, 1, 3)] + [s.swapaxes(0, 1) for s in outputs[1:]]
    outputs = outputs[: len(node.output)]
    return [
        o.astype(dtype) for o, name in zip(outputs, node.output, strict=False) if name
    ]


def masked_node(
    op_type: str, inputs: list[str] | None = None, **attributes: Any
) -> onnx.NodeProto:
    """A node of ``op_type`` in ai.onnx.preview reading ``inputs`` (default
    :data:`DEFAULT_INPUTS`) and writing every output.
    """
    return helper.make_node(
        op_type,
        inputs=inputs or DEFAULT_INPUTS[op_type],
        outputs=OUTPUTS[op_type],
        domain=AI_ONNX_PREVIEW_DOMAIN,
        **attributes,
    )


def make_mask(kind: str, seq_length: int, batch_size: int) -> np.ndarray:
    """A ``[seq_length, batch_size]`` mask: ``holes`` (steps masked anywhere, every row with at
    least one step), ``right_padded``, ``left_padded``, ``one_row_masked`` (row 0 has no step) or
    ``all_masked``.
    """
    t = np.arange(seq_length)[:, None]
    lengths = np.arange(batch_size) % max(seq_length, 1) + 1  # 1, 2, ... per row
    if kind == "holes":
        mask = np.random.rand(seq_length, batch_size) > 0.4
        mask[0, :] |= ~mask.any(axis=0)
    elif kind == "right_padded":
        mask = t < lengths
    elif kind == "left_padded":
        mask = t >= seq_length - lengths
    elif kind == "one_row_masked":
        mask = np.ones((seq_length, batch_size), dtype=bool)
        mask[:, 0] = False
    elif kind == "all_masked":
        mask = np.zeros((seq_length, batch_size), dtype=bool)
    else:
        raise ValueError(f"unknown mask kind {kind!r}")
    return mask


def make_inputs(
    node: onnx.NodeProto,
    mask: str = "holes",
    sequence_lens: list[int] | None = None,
    seq_length: int = 4,
    batch_size: int = 3,
    input_size: int = 2,
    hidden_size: int = 3,
    dtype: type = np.float32,
) -> dict[str, np.ndarray]:
    """Random inputs for the inputs ``node`` names (by their schema names), in its ``layout``."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    num_directions = 2 if attrs.get("direction") == b"bidirectional" else 1
    layout = attrs.get("layout", 0)
    gates = NUM_GATES[node.op_type]
    shapes = {
        "X": (seq_length, batch_size, input_size),
        "W": (num_directions, gates * hidden_size, input_size),
        "R": (num_directions, gates * hidden_size, hidden_size),
        "B": (num_directions, 2 * gates * hidden_size),
        "initial_h": (num_directions, batch_size, hidden_size),
        "initial_c": (num_directions, batch_size, hidden_size),
        "P": (num_directions, 3 * hidden_size),
    }
    inputs = {}
    for name in node.input:
        if name == "mask":
            inputs[name] = make_mask(mask, seq_length, batch_size)
        elif name == "sequence_lens":
            inputs[name] = np.array(sequence_lens, dtype=np.int32)
        elif name:
            inputs[name] = (np.random.randn(*shapes[name]) * 0.5).astype(dtype)
    if layout == 1:  # batch-major X, mask and initial states
        for name in ("X", "mask", "initial_h", "initial_c"):
            if name in inputs:
                inputs[name] = np.swapaxes(inputs[name], 0, 1)
    return inputs


def expect_masked(
    node: onnx.NodeProto, inputs: dict[str, np.ndarray], name: str
) -> None:
    """Records the test ``name`` with the outputs of :func:`masked_recurrence`."""
    outputs = masked_recurrence(node, inputs)
    expect(
        node,
        inputs=[inputs[n] for n in node.input if n],
        outputs=outputs,
        name=name,
        opset_imports=OPSET_IMPORTS,
    )
