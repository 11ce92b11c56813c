# SPDX-License-Identifier: Apache-2.0


"""Masked Keras recurrent layers become ai.onnx.preview MaskedLSTM, MaskedGRU and MaskedRNN nodes (tf2onnx/masked_rnn.py).

A covering set, not the cross product: every Keras flavour (Keras 3, tf_keras) meets every mask
source (Masking, Embedding(mask_zero=True), an explicit mask input), every direction (forward,
go_backwards, Bidirectional) meets both flavours, and return_sequences, return_state, initial_state,
stacked layers and every Bidirectional merge_mode appear at least once (initial_state with an explicit
mask: Keras propagates no mask to a layer called with initial_state). Each model is compared with
predict (1e-5) at two batch sizes and two lengths on post-padded, pre-padded and holed rows, and must
hold one masked node per layer direction and no Loop. GRU: tf_keras (reset_after=True) with every mask
source and direction; Keras 3's GRU, GRU(reset_after=False) and SimpleRNN (both flavours) through
keras_rnn_tf2_rewriter.py. Keras 3's own model.export(format="onnx") emits them too. A layer with
stateful=True keeps what unpatched tf2onnx emits (logged; through from_keras and model.export); a layer
called in a tf.while_loop or tf.cond becomes one recurrent node in the Loop or If.
"""

import os

import keras
import numpy as np
import onnx
import tensorflow as tf
import tf_keras
from backend_test_base import Tf2OnnxBackendTestBase
from common import check_tf_min_version, unittest_main
from parameterized import parameterized

import tf2onnx
from tf2onnx import masked_rnn
from tf2onnx.rewriter import keras_rnn_tf2_rewriter

# pylint: disable=missing-docstring

FEATURES, UNITS, VOCABULARY = 3, 4, 9
SHAPES = ((2, 7), (5, 11))  # (batch, length)


def _mask(batch, length):
    """Post-padded, pre-padded and holed rows; row 0 keeps every step, no row is empty."""
    mask = np.ones((batch, length), dtype=bool)
    for row in range(1, batch):
        kind = row % 3
        if kind == 0:
            mask[row, length - row % length :] = False
        elif kind == 1:
            mask[row, : max(1, length // 3)] = False
        else:
            mask[row, 1::2] = False
    return mask


def _feeds(source, batch, length, seed):
    """The model inputs for ``source``: masked steps are zero (Masking), id 0 (Embedding), or the mask."""
    rng = np.random.default_rng(seed)
    mask = _mask(batch, length)
    if source == "embedding":
        return [np.where(mask, rng.integers(1, VOCABULARY, (batch, length)), 0).astype(np.int32)]
    x = rng.uniform(-1, 1, (batch, length, FEATURES)).astype(np.float32)
    if source == "masking":
        return [np.where(mask[..., None], x, 0).astype(np.float32)]
    return [x, mask]


def _model(k, source, layers, initial_states=0):
    """A functional model: the mask source, then ``layers`` (callables of (tensor, mask, state)), the first
    given ``initial_states`` state inputs (LSTM: 2, GRU: 1)."""
    if source == "embedding":
        ids = k.Input((None,), dtype="int32", name="ids")
        inputs, x, mask = [ids], k.layers.Embedding(VOCABULARY, FEATURES, mask_zero=True)(ids), None
    elif source == "masking":
        x = k.Input((None, FEATURES), name="x")
        inputs, mask = [x], None
        x = k.layers.Masking(0.0)(x)
    else:
        x = k.Input((None, FEATURES), name="x")
        mask = k.Input((None,), dtype="bool", name="mask")
        inputs = [x, mask]
    state = None
    if initial_states:
        state = [k.Input((UNITS,), name=name) for name in ("h", "c")[:initial_states]]
        inputs = inputs + state
    for layer in layers:
        x = layer(x, mask, state)
        mask = state = None  # the next layer gets the mask Keras propagates
    outputs = list(x) if isinstance(x, (list, tuple)) else [x]
    return k.Model(inputs, outputs)


def _recurrent(k, kind, **kwargs):
    def call(x, mask, state):
        # a mask or initial_state given as None would hide the mask Keras propagates
        given = {name: value for name, value in (("mask", mask), ("initial_state", state)) if value is not None}
        return getattr(k.layers, kind)(UNITS, **kwargs)(x, **given)

    return call


def _bidirectional(k, kind, merge_mode, **kwargs):
    def call(x, mask, state):
        layer = k.layers.Bidirectional(getattr(k.layers, kind)(UNITS, **kwargs), merge_mode=merge_mode)
        out = layer(x, mask=mask) if mask is not None else layer(x)
        return list(out) if isinstance(out, (list, tuple)) else out

    return call


class _HalfTanhCell(keras.layers.Layer):
    """A custom cell: h = tanh(x W) + (h_prev R) / 2 (no Keras cell computes it)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = self.state_size = self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), name="recurrent_kernel")

    def call(self, inputs, states):
        h = (
            keras.ops.tanh(keras.ops.matmul(inputs, self.kernel))
            + keras.ops.matmul(states[0], self.recurrent_kernel) / 2
        )
        return h, [h]


KINDS = {"lstm": ("LSTM", "MaskedLSTM"), "gru": ("GRU", "MaskedGRU"), "rnn": ("SimpleRNN", "MaskedRNN")}
ONNX_OPS = {"LSTM": "LSTM", "GRU": "GRU", "SimpleRNN": "RNN"}


def _build(k, spec):
    """The layer call of a case's spec: (kind, kwargs) or ("bi", kind, merge_mode, kwargs)."""
    if spec[0] == "bi":
        return _bidirectional(k, KINDS[spec[1]][0], spec[2], **spec[3])
    return _recurrent(k, KINDS[spec[0]][0], **spec[1])


# (name, flavour, mask source, layers, directions (masked nodes), initial states)
CASES = [
    ("keras3_masking_sequences", "keras3", "masking", [("lstm", {"return_sequences": True})], 1, 0),
    ("keras3_embedding_last", "keras3", "embedding", [("lstm", {})], 1, 0),
    ("keras3_mask_input_state", "keras3", "mask", [("lstm", {"return_state": True})], 1, 0),
    ("keras3_embedding_backwards", "keras3", "embedding", [("lstm", {"go_backwards": True})], 1, 0),
    ("keras3_mask_initial_state", "keras3", "mask", [("lstm", {"return_sequences": True})], 1, 2),
    ("keras3_masking_bidirectional_sum", "keras3", "masking", [("bi", "lstm", "sum", {})], 2, 0),
    ("keras3_mask_bidirectional_mul", "keras3", "mask", [("bi", "lstm", "mul", {"return_sequences": True})], 2, 0),
    (
        "tf_keras_masking_backwards",
        "tf_keras",
        "masking",
        [("lstm", {"go_backwards": True, "return_sequences": True})],
        1,
        0,
    ),
    (
        "tf_keras_embedding_stacked",
        "tf_keras",
        "embedding",
        [("lstm", {"return_sequences": True}), ("lstm", {})],
        2,
        0,
    ),
    (
        "tf_keras_mask_bidirectional_concat",
        "tf_keras",
        "mask",
        [("bi", "lstm", "concat", {"return_sequences": True})],
        2,
        0,
    ),
    ("tf_keras_masking_bidirectional_ave", "tf_keras", "masking", [("bi", "lstm", "ave", {})], 2, 0),
    (
        "tf_keras_embedding_bidirectional_none",
        "tf_keras",
        "embedding",
        [("bi", "lstm", None, {"return_sequences": True})],
        2,
        0,
    ),
    ("tf_keras_masking_gru", "tf_keras", "masking", [("gru", {"return_sequences": True})], 1, 0),
    (
        "tf_keras_embedding_gru_backwards_state",
        "tf_keras",
        "embedding",
        [("gru", {"go_backwards": True, "return_state": True})],
        1,
        0,
    ),
    ("tf_keras_mask_gru_initial_state", "tf_keras", "mask", [("gru", {})], 1, 1),
    (
        "tf_keras_masking_bidirectional_gru",
        "tf_keras",
        "masking",
        [("bi", "gru", "concat", {"return_sequences": True}), ("gru", {})],
        3,
        0,
    ),
    # Keras 3 GRU (reset_after=True and False), tf_keras GRU(reset_after=False): MaskedGRU
    ("keras3_masking_gru", "keras3", "masking", [("gru", {"return_sequences": True})], 1, 0),
    (
        "keras3_embedding_gru_backwards_state",
        "keras3",
        "embedding",
        [("gru", {"go_backwards": True, "return_state": True})],
        1,
        0,
    ),
    ("keras3_mask_gru_initial_state", "keras3", "mask", [("gru", {"return_sequences": True})], 1, 1),
    ("keras3_mask_bidirectional_gru_sum", "keras3", "mask", [("bi", "gru", "sum", {"return_sequences": True})], 2, 0),
    (
        "keras3_embedding_gru_reset_before_stacked",
        "keras3",
        "embedding",
        [("gru", {"reset_after": False, "return_sequences": True}), ("gru", {"reset_after": False})],
        2,
        0,
    ),
    (
        "keras3_masking_gru_reset_before_no_bias",
        "keras3",
        "masking",
        [("gru", {"reset_after": False, "use_bias": False})],
        1,
        0,
    ),
    (
        "tf_keras_mask_gru_reset_before_backwards",
        "tf_keras",
        "mask",
        [("gru", {"reset_after": False, "go_backwards": True, "return_sequences": True})],
        1,
        0,
    ),
    (
        "tf_keras_masking_bidirectional_gru_reset_before",
        "tf_keras",
        "masking",
        [("bi", "gru", "mul", {"reset_after": False})],
        2,
        0,
    ),
    (
        "tf_keras_embedding_gru_reset_before_state",
        "tf_keras",
        "embedding",
        [("gru", {"reset_after": False, "return_state": True})],
        1,
        0,
    ),
    # SimpleRNN: MaskedRNN
    ("keras3_masking_rnn", "keras3", "masking", [("rnn", {"return_sequences": True})], 1, 0),
    ("keras3_mask_rnn_relu_initial_state", "keras3", "mask", [("rnn", {"activation": "relu"})], 1, 1),
    (
        "keras3_embedding_bidirectional_rnn_stacked",
        "keras3",
        "embedding",
        [("bi", "rnn", "concat", {"return_sequences": True}), ("rnn", {"go_backwards": True})],
        3,
        0,
    ),
    (
        "tf_keras_embedding_rnn_backwards_state",
        "tf_keras",
        "embedding",
        [("rnn", {"go_backwards": True, "return_state": True, "return_sequences": True})],
        1,
        0,
    ),
    ("tf_keras_masking_bidirectional_rnn_ave", "tf_keras", "masking", [("bi", "rnn", "ave", {})], 2, 0),
    (
        "tf_keras_mask_rnn_sigmoid_no_bias",
        "tf_keras",
        "mask",
        [("rnn", {"activation": "sigmoid", "use_bias": False})],
        1,
        0,
    ),
    ("tf_keras_mask_rnn_initial_state", "tf_keras", "mask", [("rnn", {"return_sequences": True})], 1, 1),
]


def _count(graph, op_type):
    """Nodes of ``op_type`` in ``graph`` and its subgraphs."""
    total = 0
    for node in graph.node:
        total += node.op_type == op_type
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                total += _count(subgraph, op_type)
    return total


class KerasMaskedLSTMTests(Tf2OnnxBackendTestBase):
    def setUp(self):
        super().setUp()
        os.makedirs(self.test_data_directory, exist_ok=True)
        keras.utils.set_random_seed(0)
        tf_keras.utils.set_random_seed(0)

    def _convert(self, model, opset):
        path = os.path.join(self.test_data_directory, "model.onnx")
        model_proto, _ = tf2onnx.convert.from_keras(model, opset=opset, output_path=path)
        return model_proto, path

    def _compare(self, model, path, source, initial_states=0):
        for seed, (batch, length) in enumerate(SHAPES):
            feeds = _feeds(source, batch, length, seed)
            rng = np.random.default_rng(10 + seed)
            feeds += [rng.uniform(-1, 1, (batch, UNITS)).astype(np.float32) for _ in range(initial_states)]
            expected = model.predict(feeds, verbose=0)
            expected = expected if isinstance(expected, list) else [expected]
            names = [i.name for i in onnx.load(path).graph.input]
            actual = self.run_onnxruntime(path, dict(zip(names, feeds)), None)
            self.assertEqual(len(actual), len(expected))
            for e, a in zip(expected, actual):
                self.assertAllClose(e, a, rtol=1e-5, atol=1e-5)

    @parameterized.expand(CASES)
    @check_tf_min_version("2.16")
    def test_masked_rnn(self, _, flavour, source, layers, directions, initial_states):
        k = keras if flavour == "keras3" else tf_keras
        calls = [_build(k, spec) for spec in layers]
        model = _model(k, source, calls, initial_states)
        with self.assertLogs("tf2onnx", "INFO") as logs:
            model_proto, path = self._convert(model, max(self.config.opset, masked_rnn.MIN_OPSET))
        self.assertFalse([line for line in logs.output if "kept as a loop" in line])
        masked = sum(_count(model_proto.graph, masked_op) for _, masked_op in KINDS.values())
        self.assertEqual(masked, directions)
        self.assertEqual(_count(model_proto.graph, "Loop"), 0)
        for plain_op, _ in KINDS.values():
            self.assertEqual(_count(model_proto.graph, ONNX_OPS[plain_op]), 0)
        self.assertEqual(len(model_proto.functions), len({f.overload for f in model_proto.functions}))
        onnx.checker.check_model(model_proto)
        self._compare(model, path, source, initial_states)

    @check_tf_min_version("2.16")
    def test_keras_export_emits_masked_lstm(self):
        # Keras 3's own model.export(format="onnx") on the TensorFlow backend calls tf2onnx.convert.from_function
        # (after its own monkeypatch of tf2onnx for numpy 2)
        self.assertEqual(keras.backend.backend(), "tensorflow")
        calls = [_bidirectional(keras, "LSTM", "concat", return_sequences=True), _recurrent(keras, "LSTM")]
        model = _model(keras, "embedding", calls)
        model.predict(_feeds("embedding", 2, 5, 0), verbose=0)  # export needs a model that has been called
        path = os.path.join(self.test_data_directory, "export.onnx")
        model.export(path, format="onnx", opset_version=masked_rnn.MIN_OPSET, verbose=False)
        model_proto = onnx.load(path)
        self.assertEqual(_count(model_proto.graph, "MaskedLSTM"), 3)
        self.assertEqual(_count(model_proto.graph, "Loop"), 0)
        self._compare(model, path, "embedding")

    @parameterized.expand(
        [
            ("lstm", "LSTM", False, ["stateful_rnn"]),
            ("bidirectional_gru", "GRU", True, ["forward_stateful_rnn", "backward_stateful_rnn"]),
        ]
    )
    @check_tf_min_version("2.16")
    def test_keras_export_stateful_keeps_the_loop(self, _, kind, bidirectional, names):
        # model.export calls from_function, which has no Keras model to read stateful from: it names the while
        # loops whose outputs the traced function assigns to variables (the state for the next call)
        batch, length = 2, 5
        x = keras.Input(batch_shape=(batch, length, FEATURES), name="x")
        layer = getattr(keras.layers, kind)(UNITS, stateful=True, return_sequences=True, name="stateful_rnn")
        if bidirectional:
            layer = keras.layers.Bidirectional(layer)
        model = keras.Model(x, layer(keras.layers.Masking(0.0)(x)))
        feeds = _feeds("masking", batch, length, 0)
        model.predict(feeds, verbose=0)  # a state that is not zeros
        path = os.path.join(self.test_data_directory, "export_stateful.onnx")
        with self.assertLogs("tf2onnx.rewriter.keras_mask_utils", "INFO") as logs:
            model.export(path, format="onnx", opset_version=masked_rnn.MIN_OPSET, verbose=False)
        kept = [line for line in logs.output if "kept as a loop: stateful=True" in line]
        self.assertEqual(len(kept), len(names), logs.output)
        for name in names:
            self.assertTrue(any("recurrent layer %s" % name in line for line in kept), kept)
        model_proto = onnx.load(path)
        self.assertEqual(_count(model_proto.graph, "Loop"), len(names))
        for op in ("MaskedLSTM", "MaskedGRU", "LSTM", "GRU"):
            self.assertEqual(_count(model_proto.graph, op), 0, op)
        expected = model.predict(feeds, verbose=0)  # starts from the frozen state
        actual = self.run_onnxruntime(path, {"x": feeds[0]}, None)
        self.assertAllClose(expected, actual[0], rtol=1e-5, atol=1e-5)

    @check_tf_min_version("2.16")
    def test_below_opset_18_keeps_the_loop(self):
        model = _model(keras, "masking", [_recurrent(keras, "LSTM", return_sequences=True)])
        with self.assertLogs("tf2onnx.rewriter.keras_mask_utils", "INFO") as logs:
            model_proto, path = self._convert(model, 15)
        self.assertTrue(any("kept as a loop" in line and "opset 18" in line for line in logs.output), logs.output)
        self.assertEqual(_count(model_proto.graph, "MaskedLSTM"), 0)
        self.assertEqual(_count(model_proto.graph, "Loop"), 1)
        self._compare(model, path, "masking")

    @parameterized.expand(
        [
            ("keras3_gru", "keras3", "GRU", {}),
            ("keras3_gru_reset_before", "keras3", "GRU", {"reset_after": False}),
            ("tf_keras_gru_reset_before", "tf_keras", "GRU", {"reset_after": False, "go_backwards": True}),
            ("keras3_rnn", "keras3", "SimpleRNN", {"return_state": True}),
            ("tf_keras_rnn", "tf_keras", "SimpleRNN", {"activation": "relu"}),
        ]
    )
    @check_tf_min_version("2.16")
    def test_unmasked_gru_and_rnn(self, _, flavour, kind, kwargs):
        # an unmasked layer the GRU rewriter did not match (a Loop before): one GRU or RNN node
        k = keras if flavour == "keras3" else tf_keras
        x = k.Input((None, FEATURES), name="x")
        outputs = getattr(k.layers, kind)(UNITS, return_sequences=True, **kwargs)(x)
        model = k.Model(x, list(outputs) if isinstance(outputs, (list, tuple)) else outputs)
        model_proto, path = self._convert(model, masked_rnn.MIN_OPSET)
        self.assertEqual(_count(model_proto.graph, ONNX_OPS[kind]), 1)
        self.assertEqual(_count(model_proto.graph, "Loop"), 0)
        self.assertEqual(len(model_proto.functions), 0)
        self._compare(model, path, "masking")

    def _assert_kept(self, model, name, reason):
        """Converts ``model``: the layer ``name`` stays a Loop, the log says so with ``reason``."""
        with self.assertLogs("tf2onnx.rewriter.keras_rnn_tf2_rewriter", "INFO") as logs:
            model_proto, path = self._convert(model, masked_rnn.MIN_OPSET)
        kept = [line for line in logs.output if "kept as a loop" in line and name in line]
        self.assertTrue(kept and all(reason in line for line in kept), logs.output)
        self.assertEqual(_count(model_proto.graph, "Loop"), 1)
        for plain_op, masked_op in KINDS.values():
            self.assertEqual(_count(model_proto.graph, masked_op) + _count(model_proto.graph, ONNX_OPS[plain_op]), 0)
        return path

    @check_tf_min_version("2.16")
    def test_custom_cell_keeps_the_loop(self):
        layer = keras.layers.RNN(_HalfTanhCell(UNITS), return_sequences=True, name="custom_rnn")
        model = _model(keras, "masking", [lambda x, mask, state: layer(x)])
        path = self._assert_kept(model, "custom_rnn", keras_rnn_tf2_rewriter.NOT_A_CELL)
        self._compare(model, path, "masking")

    @parameterized.expand(
        [
            ("keras3_gru_swish", "keras3", "GRU", {"activation": "swish"}),
            ("tf_keras_rnn_softsign", "tf_keras", "SimpleRNN", {"activation": "softsign"}),
        ]
    )
    @check_tf_min_version("2.16")
    def test_inexact_activation_keeps_the_loop(self, _, flavour, kind, kwargs):
        k = keras if flavour == "keras3" else tf_keras
        layer = getattr(k.layers, kind)(UNITS, name="odd_activation", **kwargs)
        model = _model(k, "masking", [lambda x, mask, state: layer(x)])
        path = self._assert_kept(model, "odd_activation", "")
        self._compare(model, path, "masking")

    @parameterized.expand(
        [
            # (name, flavour, kind, Bidirectional, Masking, the nodes unpatched tf2onnx emits)
            ("keras3_lstm", "keras3", "LSTM", False, True, {"Loop": 1}),
            ("tf_keras_bidirectional_lstm", "tf_keras", "LSTM", True, True, {"Loop": 2}),
            ("keras3_bidirectional_gru", "keras3", "GRU", True, True, {"Loop": 2}),
            ("tf_keras_gru", "tf_keras", "GRU", False, True, {"Loop": 1}),
            ("tf_keras_rnn", "tf_keras", "SimpleRNN", False, True, {"Loop": 1}),
            ("keras3_gru_unmasked", "keras3", "GRU", False, False, {"Loop": 1}),
            ("tf_keras_lstm_unmasked", "tf_keras", "LSTM", False, False, {"LSTM": 1}),
        ]
    )
    @check_tf_min_version("2.16")
    def test_stateful_keeps_the_conversion(self, _, flavour, kind, bidirectional, masking, nodes):
        # stateful=True: the state left by the last call is frozen into a constant initial state; the series
        # keeps what unpatched tf2onnx emits (a masked layer's Loop, tf2onnx's LSTM or GRU node) and logs it
        k = keras if flavour == "keras3" else tf_keras
        batch, length = 2, 7
        x = k.Input(batch_size=batch, shape=(None, FEATURES), name="x")
        layer = getattr(k.layers, kind)(UNITS, stateful=True, return_sequences=True, name="stateful_rnn")
        names = ["forward_stateful_rnn", "backward_stateful_rnn"] if bidirectional else ["stateful_rnn"]
        if bidirectional:
            layer = k.layers.Bidirectional(layer)
        model = k.Model(x, layer(k.layers.Masking(0.0)(x) if masking else x))
        feeds = _feeds("masking", batch, length, 0)
        model.predict(feeds, verbose=0)  # a state that is not zeros
        with self.assertLogs("tf2onnx", "INFO") as logs:  # tf2onnx logs the conversion's steps too
            model_proto, path = self._convert(model, masked_rnn.MIN_OPSET)
        kept = [line for line in logs.output if "kept as a loop" in line]
        if "Loop" in nodes:
            for name in names:
                self.assertTrue(any("recurrent layer %s kept as a loop: stateful=True" % name in line for line in kept))
        self.assertEqual(len(kept), nodes.get("Loop", 0), logs.output)
        for op_type in ["Loop"] + [op for pair in KINDS.values() for op in (ONNX_OPS[pair[0]], pair[1])]:
            self.assertEqual(_count(model_proto.graph, op_type), nodes.get(op_type, 0), op_type)
        expected = model.predict(feeds, verbose=0)  # starts from the frozen state
        actual = self.run_onnxruntime(path, {"x": feeds[0]}, None)
        self.assertAllClose(expected, actual[0], rtol=1e-5, atol=1e-5)

    @parameterized.expand(
        [
            # (name, flavour, kind, tf.while_loop or tf.cond, masked, layer options)
            ("keras3_lstm_while_masked", "keras3", "lstm", "while", True, {}),
            ("tf_keras_lstm_while", "tf_keras", "lstm", "while", False, {}),
            ("tf_keras_lstm_while_masked_no_bias", "tf_keras", "lstm", "while", True, {"use_bias": False}),
            ("keras3_lstm_cond", "keras3", "lstm", "cond", False, {}),
            ("tf_keras_lstm_cond_masked", "tf_keras", "lstm", "cond", True, {}),
            ("tf_keras_gru_while_masked", "tf_keras", "gru", "while", True, {}),
            ("tf_keras_gru_cond", "tf_keras", "gru", "cond", False, {}),
            ("keras3_gru_while_masked", "keras3", "gru", "while", True, {}),
            (
                "keras3_gru_reset_before_cond_masked",
                "keras3",
                "gru",
                "cond",
                True,
                {"reset_after": False, "use_bias": False},
            ),
            ("tf_keras_gru_reset_before_while", "tf_keras", "gru", "while", False, {"reset_after": False}),
            ("keras3_rnn_while", "keras3", "rnn", "while", False, {}),
            ("tf_keras_rnn_cond_masked", "tf_keras", "rnn", "cond", True, {}),
        ]
    )
    @check_tf_min_version("2.16")
    def test_recurrent_in_control_flow(self, _, flavour, kind, where, masked, kwargs):
        # a layer called in a tf.while_loop or tf.cond reads its weights from the body's or branch's inputs:
        # one recurrent node in the Loop or If, its weights reordered by ONNX ops
        k = keras if flavour == "keras3" else tf_keras
        plain_op, masked_op = KINDS[kind]
        layer = getattr(k.layers, plain_op)(UNITS, return_sequences=True, **kwargs)
        layer.build((None, None, UNITS))
        signature = [
            tf.TensorSpec([None, None, UNITS], tf.float32, name="x"),
            tf.TensorSpec([None, None], tf.bool, name="mask"),
            tf.TensorSpec([], tf.int32, name="n"),
        ]

        def call(x, mask):
            return layer(x, mask=mask) if masked else layer(x)

        @tf.function(input_signature=signature)
        def function(x, mask, n):
            if where == "while":
                return tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, call(y, mask)), [0, x])[1]
            return tf.cond(n > 0, lambda: call(x, mask), lambda: x * 2.0)

        path = os.path.join(self.test_data_directory, "control_flow.onnx")
        model_proto, _ = tf2onnx.convert.from_function(
            function, input_signature=signature, opset=masked_rnn.MIN_OPSET, output_path=path
        )
        outer = "Loop" if where == "while" else "If"
        self.assertEqual([n.op_type for n in model_proto.graph.node].count(outer), 1)
        self.assertEqual(_count(model_proto.graph, "Loop") + _count(model_proto.graph, "If"), 1)
        body = [n for n in model_proto.graph.node if n.op_type == outer][0]
        rnn_op = masked_op if masked else ONNX_OPS[plain_op]
        self.assertEqual(sum(_count(a.g, rnn_op) for a in body.attribute if a.HasField("g")), 1)
        nodes = sum(_count(model_proto.graph, op) for pair in KINDS.values() for op in (ONNX_OPS[pair[0]], pair[1]))
        self.assertEqual(nodes, 1)
        onnx.checker.check_model(model_proto)
        for seed, (batch, length) in enumerate(SHAPES):
            mask = _mask(batch, length)
            x = np.random.default_rng(seed).uniform(-1, 1, (batch, length, UNITS)).astype(np.float32)
            for n in (0, 1, 3):
                feeds = {"x": x, "mask": mask, "n": np.array(n, dtype=np.int32)}
                expected = function(**feeds).numpy()
                actual = self.run_onnxruntime(path, feeds, None)[0]
                self.assertAllClose(expected, actual, rtol=1e-5, atol=1e-5)

    @check_tf_min_version("2.16")
    def test_unmasked_lstm_stays_lstm(self):
        x = keras.Input((None, FEATURES), name="x")
        model = keras.Model(x, keras.layers.LSTM(UNITS, return_sequences=True)(x))
        model_proto, path = self._convert(model, masked_rnn.MIN_OPSET)
        self.assertEqual(_count(model_proto.graph, "LSTM"), 1)
        self.assertEqual(_count(model_proto.graph, "MaskedLSTM"), 0)
        self.assertEqual(len(model_proto.functions), 0)
        self._compare(model, path, "masking")


if __name__ == "__main__":
    unittest_main()
