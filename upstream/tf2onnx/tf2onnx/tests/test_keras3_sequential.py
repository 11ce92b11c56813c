# SPDX-License-Identifier: Apache-2.0


"""Keras 3 Sequential models through tf2onnx.convert.from_keras.

A Keras 3 Sequential model has no output_names and its outputs are KerasTensors named keras_tensor_N,
which name nothing in the traced graph: from_keras failed on every such model with a KeyError. It now
names the inputs and outputs after the layers that make them, as it does for a functional model.
"""

import os
import unittest

import keras
import numpy as np
from backend_test_base import Tf2OnnxBackendTestBase
from common import check_tf_min_version, unittest_main

import tf2onnx

# pylint: disable=missing-docstring


def _sequences(batch, length, features, seed):
    """Float sequences with masked (all-zero) steps: post-padded, pre-padded and holed rows, none empty."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (batch, length, features)).astype(np.float32)
    for row in range(batch):
        kind = row % 3
        if kind == 0:
            x[row, length - row % length :] = 0  # post-padded (row 0 keeps every step)
        elif kind == 1:
            x[row, : max(1, length // 3)] = 0  # pre-padded
        else:
            x[row, 1::2] = 0  # holes
    return x


@unittest.skipIf(not keras.__version__.startswith("3."), "needs Keras 3 (keras " + keras.__version__ + ")")
class Keras3SequentialTests(Tf2OnnxBackendTestBase):
    def setUp(self):
        super().setUp()
        os.makedirs(self.test_data_directory, exist_ok=True)
        keras.utils.set_random_seed(0)

    def _convert_and_compare(self, model, inputs, input_name=None):
        """Converts ``model``, checks its input and output names, compares it with predict on ``inputs``."""
        path = os.path.join(self.test_data_directory, "model.onnx")
        model_proto, _ = tf2onnx.convert.from_keras(model, opset=self.config.opset, output_path=path)
        (model_input,) = model_proto.graph.input
        if input_name is not None:
            self.assertEqual(model_input.name, input_name)
        self.assertEqual([o.name for o in model_proto.graph.output], [model.layers[-1].name])
        for x in inputs:
            expected = model.predict(x, verbose=0)
            (actual,) = self.run_onnxruntime(path, {model_input.name: x}, [model.layers[-1].name])
            self.assertAllClose(expected, actual, rtol=1e-5, atol=1e-5)
        return model_proto

    @check_tf_min_version("2.16")
    def test_unmasked_sequential(self):
        model = keras.Sequential(
            [keras.Input((6, 3), name="x"), keras.layers.LSTM(5, return_sequences=True), keras.layers.Dense(2)]
        )
        rng = np.random.default_rng(1)
        inputs = [rng.uniform(-1, 1, (batch, 6, 3)).astype(np.float32) for batch in (1, 4)]
        self._convert_and_compare(model, inputs, "x")

    @check_tf_min_version("2.16")
    def test_masked_sequential(self):
        model = keras.Sequential(
            [
                keras.Input((None, 3), name="x"),
                keras.layers.Masking(0.0),
                keras.layers.LSTM(5, return_sequences=True),
                keras.layers.GRU(4),
                keras.layers.Dense(2),
            ]
        )
        inputs = [_sequences(2, 7, 3, seed=2), _sequences(5, 11, 3, seed=3)]
        self._convert_and_compare(model, inputs, "x")

    @check_tf_min_version("2.16")
    def test_lstm_sigmoid_dropout_is_one_lstm_node(self):
        # onnxruntime issue 12492's layer: it became a Loop, and Keras 3 Sequential models did not convert
        model = keras.Sequential(
            [keras.Input((16, 16), name="x"), keras.layers.LSTM(16, activation="sigmoid", dropout=0.1)]
        )
        rng = np.random.default_rng(5)
        inputs = [rng.uniform(-1, 1, (batch, 16, 16)).astype(np.float32) for batch in (1, 3)]
        model_proto = self._convert_and_compare(model, inputs, "x")
        op_types = [node.op_type for node in model_proto.graph.node]
        self.assertEqual(op_types.count("LSTM"), 1)
        self.assertNotIn("Loop", op_types)

    @check_tf_min_version("2.16")
    def test_sequential_without_input_names_its_output(self):
        model = keras.Sequential([keras.layers.Dense(3, name="scores")])
        model.build((None, 4))
        x = np.random.default_rng(4).uniform(-1, 1, (3, 4)).astype(np.float32)
        self._convert_and_compare(model, [x])


if __name__ == "__main__":
    unittest_main()
