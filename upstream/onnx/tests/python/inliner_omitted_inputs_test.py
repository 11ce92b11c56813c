# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

import numpy as np

from onnx import TensorProto, checker, helper, inliner
from onnx.reference import ReferenceEvaluator


class TestInlinerOmittedInputs:
    def test_context_dependent_function_with_omitted_middle_input(self) -> None:
        # Attention-23 without attn_mask (input 3) but with past_key/past_value after it: the
        # inliner asked the model for the type of "" and failed ("Type unknown for").
        node = helper.make_node(
            "Attention",
            ["Q", "K", "V", "", "past_key", "past_value"],
            ["Y", "present_key", "present_value"],
        )
        shapes = {
            "Q": (1, 2, 3, 4),
            "K": (1, 2, 3, 4),
            "V": (1, 2, 3, 4),
            "past_key": (1, 2, 1, 4),
            "past_value": (1, 2, 1, 4),
        }
        graph = helper.make_graph(
            [node],
            "attention_without_mask",
            [
                helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                for name, shape in shapes.items()
            ],
            [
                helper.make_tensor_value_info(
                    name, TensorProto.FLOAT, ("B", "H", "S", "D")
                )
                for name in node.output
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])

        inlined = inliner.inline_selected_functions(
            model, [], exclude=True, inline_schema_functions=True
        )

        assert "Attention" not in [n.op_type for n in inlined.graph.node]
        checker.check_model(inlined)
        rng = np.random.default_rng(0)
        feeds = {
            name: rng.standard_normal(shape).astype(np.float32)
            for name, shape in shapes.items()
        }
        expected = ReferenceEvaluator(model).run(None, feeds)
        for actual, wanted in zip(
            ReferenceEvaluator(inlined).run(None, feeds), expected, strict=True
        ):
            np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-6)
