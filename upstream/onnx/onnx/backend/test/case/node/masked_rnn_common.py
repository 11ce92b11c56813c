# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the node tests of MaskedLSTM, MaskedGRU and MaskedRNN share: inputs, masks, expect."""

from __future__ import annotations

import numpy as np

import onnx
from onnx import helper
from onnx.backend.test.case.node import expect
from onnx.defs import AI_ONNX_PREVIEW_DOMAIN
from onnx.reference import ReferenceEvaluator

# The function bodies of MaskedLSTM, MaskedGRU and MaskedRNN are built at ai.onnx opset 22.
OPSET_IMPORTS = [
    helper.make_opsetid("", 22),
    helper.make_opsetid(AI_ONNX_PREVIEW_DOMAIN, 1),
]
NUM_GATES = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}


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
    """Records the test ``name`` with the outputs of the reference implementation."""
    outputs = ReferenceEvaluator(node).run(None, inputs)
    expect(
        node,
        inputs=[inputs[n] for n in node.input if n],
        outputs=outputs,
        name=name,
        opset_imports=OPSET_IMPORTS,
    )
