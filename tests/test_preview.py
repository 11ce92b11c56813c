"""``from_preview``: tf2onnx's ``ai.onnx.preview`` MaskedLSTM/GRU/RNN nodes onto the package's domain.

The preview models are built by hand as the tf2onnx series writes them (``ai.onnx.preview`` nodes
naming overloads of model-local ``ai.onnx.preview`` functions, the preview import): the package's
model with its bodies attached, moved to ``ai.onnx.preview`` (onnx's schema builds its bodies from the
same source, ``upstream/``), so no tf2onnx is needed. Each runs in onnxruntime as it is (on the
preview bodies) and after ``attach_functions``, ``inline`` (both forms), ``kernel.session`` and the
command line, equal to the numpy reference; refusals name the node.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracles import assert_close
from toolkit import TOLERANCE, run

import onnx_masked_rnn
from onnx_masked_rnn import (
    DOMAIN,
    PREVIEW_DOMAIN,
    attach_functions,
    cli,
    from_preview,
    inline,
    kernel,
    reference,
)
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.preview import PREVIEW_VERSION, has_preview_nodes
from onnx_masked_rnn.testing import random_inputs, value_info

T, N, I, H = 6, 3, 4, 5
FLOAT = TensorProto.FLOAT


def all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return list(walk_nodes(model.graph.node)) + [n for f in model.functions for n in walk_nodes(f.node)]


def package_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """A bidirectional MaskedLSTM ("carry") feeding a MaskedGRU inside a model-local function, and a
    MaskedRNN in an If branch: the package's nodes without bodies, the feeds and the reference's
    outputs (Y of the LSTM, Y_h of the GRU, Y of the RNN)."""
    lstm = parse_attributes("MaskedLSTM", hidden_size=H, direction="bidirectional", masked_output="carry")
    gru = parse_attributes("MaskedGRU", hidden_size=H, linear_before_reset=1)
    rnn = parse_attributes("MaskedRNN", hidden_size=H, direction="reverse")
    rng = np.random.default_rng(7)
    feeds = random_inputs(lstm, T, N, I, H, rng=rng, present=("B", "mask"), mask_kind="holes")
    g = random_inputs(gru, T, N, 2 * H, H, rng=rng, present=("B",))
    r = random_inputs(rnn, T, N, I, H, rng=rng, present=())
    weights = {"W2": g["W"], "R2": g["R"], "B2": g["B"], "W3": r["W"], "R3": r["R"]}
    feeds["flag"] = np.array(True)
    y, _, _ = reference.masked_lstm(**{k: v for k, v in feeds.items() if k != "flag"}, **lstm.to_onnx())
    x2 = y.transpose(0, 2, 1, 3).reshape(T, N, 2 * H)
    _, y_h2 = reference.masked_gru(x2, g["W"], g["R"], g["B"], mask=feeds["mask"], **gru.to_onnx())
    y3, _ = reference.masked_rnn(feeds["X"], r["W"], r["R"], mask=feeds["mask"], **rnn.to_onnx())
    encoder = helper.make_function(
        "my.layers",
        "Encoder",
        ["x", "w", "r", "b", "m"],
        ["y_h"],
        [
            helper.make_node(
                "MaskedGRU", ["x", "w", "r", "b", "", "", "m"], ["y", "y_h"], domain=DOMAIN, name="gru",
                **gru.to_onnx(),
            )
        ],
        [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, 1)],
    )  # fmt: skip
    branch = helper.make_graph(
        [
            helper.make_node(
                "MaskedRNN", ["X", "W3", "R3", "", "", "", "mask"], ["Y3"], domain=DOMAIN, name="rnn",
                **rnn.to_onnx(),
            )
        ],
        "then",
        [],
        [helper.make_tensor_value_info("Y3", FLOAT, None)],
    )  # fmt: skip
    other = helper.make_graph(
        [helper.make_node("Identity", ["zeros"], ["Y3z"])],
        "else",
        [],
        [helper.make_tensor_value_info("Y3z", FLOAT, None)],
    )
    nodes = [
        helper.make_node(
            "MaskedLSTM", ["X", "W", "R", "B", "", "", "", "", "mask"], ["Y"], domain=DOMAIN, name="lstm",
            **lstm.to_onnx(),
        ),
        helper.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["Yt", "shape"], ["X2"]),
        helper.make_node("Encoder", ["X2", "W2", "R2", "B2", "mask"], ["Y_h2"], domain="my.layers"),
        helper.make_node("If", ["flag"], ["Y3"], then_branch=branch, else_branch=other),
    ]  # fmt: skip
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in weights.items()]
    inits += [
        onnx.numpy_helper.from_array(np.array([T, N, 2 * H], np.int64), "shape"),
        onnx.numpy_helper.from_array(np.zeros((T, 2, N, H), np.float32), "zeros"),
    ]
    graph = helper.make_graph(
        nodes,
        "preview",
        [value_info(k, v) for k, v in feeds.items()],
        [value_info("Y", y), value_info("Y_h2", y_h2), value_info("Y3", y3)],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in (("", 21), (DOMAIN, 1), ("my.layers", 1))],
        functions=[encoder],
        ir_version=10,
    )
    return model, feeds, [y, y_h2, y3]


def to_preview(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` as the tf2onnx series writes it: its bodies attached, then every node, function and
    import of the package's domain moved to ``ai.onnx.preview``."""
    out = attach_functions(model)
    for node in all_nodes(out):
        if node.domain == DOMAIN:
            node.domain = PREVIEW_DOMAIN
    for scope in (out, *out.functions):
        for opset in scope.opset_import:
            if opset.domain == DOMAIN:
                opset.domain = PREVIEW_DOMAIN
    for function in out.functions:
        if function.domain == DOMAIN:
            function.domain = PREVIEW_DOMAIN
    assert not [n for n in all_nodes(out) if n.domain == DOMAIN]
    return out


@pytest.fixture(scope="module")
def models() -> tuple[onnx.ModelProto, onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    model, feeds, expected = package_model()
    return model, to_preview(model), feeds, expected


def test_the_preview_model_runs_on_its_preview_bodies(models):
    """The hand-built preview model is a valid one: onnxruntime runs its preview bodies."""
    _, preview, feeds, expected = models
    assert has_preview_nodes(preview)
    assert_close("onnxruntime, preview model", run(preview, feeds), expected, **TOLERANCE)


def test_from_preview_gives_the_package_nodes_and_drops_the_preview_bodies_and_import(models):
    model, preview, _, _ = models
    mapped = from_preview(preview)
    assert not has_preview_nodes(mapped)
    assert [n.domain for n in all_nodes(mapped) if n.op_type.startswith("Masked")] == [DOMAIN] * 3
    assert not [n for n in all_nodes(mapped) if n.overload]
    assert not [f for f in mapped.functions if f.name.startswith("Masked")]
    for scope in (mapped, *mapped.functions):
        assert PREVIEW_DOMAIN not in {o.domain for o in scope.opset_import}
    assert {o.domain: o.version for o in mapped.functions[0].opset_import}[DOMAIN] == 1
    original = {n.name: n for n in all_nodes(model)}
    for node in all_nodes(mapped):  # the same inputs, outputs and attributes
        if node.op_type.startswith("Masked"):
            assert (node.input, node.output, node.attribute) == (
                original[node.name].input,
                original[node.name].output,
                original[node.name].attribute,
            )
    assert preview.functions[-1].domain == PREVIEW_DOMAIN, "the argument is left as it was"


@pytest.mark.parametrize(
    "deploy",
    [
        pytest.param(attach_functions, id="attach_functions"),
        pytest.param(lambda m: inline(m, "scan"), id="inline scan"),
        pytest.param(lambda m: inline(m, "native"), id="inline native"),
    ],
)
def test_every_deployment_takes_the_preview_model_as_the_package_model(models, deploy):
    """Through ``attach_functions`` and ``inline``, the preview model gives byte for byte the model
    the package's own gives, and it runs equal to the reference."""
    model, preview, feeds, expected = models
    deployed = deploy(preview)
    assert deployed.SerializeToString() == deploy(model).SerializeToString()
    assert PREVIEW_DOMAIN not in {o.domain for o in deployed.opset_import}
    assert_close("onnxruntime, preview model", run(deployed, feeds), expected, **TOLERANCE)


def test_the_kernel_session_runs_the_preview_model(models):
    """``kernel.session`` maps the preview nodes and runs them on the kernel (no fallback warning:
    every node is one the kernel covers)."""
    _, preview, feeds, expected = models
    for form in (preview, preview.SerializeToString()):
        with warnings.catch_warnings():
            warnings.simplefilter("error", kernel.KernelFallbackWarning)
            session = kernel.session(form, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        assert_close(
            "onnxruntime kernel, preview model",
            session.run(None, {k: v for k, v in feeds.items() if k in names}),
            expected,
            **TOLERANCE,
        )


def test_a_model_without_preview_nodes_comes_back_as_a_copy(models):
    model, _, _, _ = models
    mapped = from_preview(model)
    assert mapped is not model
    assert mapped.SerializeToString() == model.SerializeToString()


def test_another_preview_op_keeps_the_preview_import(models):
    """Only the masked ops are mapped: an ai.onnx.preview node of another op stays, with its import."""
    _, preview, _, _ = models
    extended = onnx.ModelProto()
    extended.CopyFrom(preview)
    extended.graph.node.append(helper.make_node("SomeFutureOp", ["X"], ["Z"], domain=PREVIEW_DOMAIN))
    mapped = from_preview(extended)
    assert mapped.graph.node[-1].domain == PREVIEW_DOMAIN
    assert {o.domain: o.version for o in mapped.opset_import}[PREVIEW_DOMAIN] == PREVIEW_VERSION
    assert not has_preview_nodes(mapped)


def _set_preview_version(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for opset in out.opset_import:
        if opset.domain == PREVIEW_DOMAIN:
            opset.version = version
    return out


def _with_attribute(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.node[0].attribute.append(helper.make_attribute("zoneout", 0.1))
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            lambda m: _set_preview_version(m, 2),
            "ai.onnx.preview node 'lstm' (MaskedLSTM): ai.onnx.preview is imported at version 2; only "
            "version 1",
            id="unknown version",
        ),
        pytest.param(
            _with_attribute,
            "ai.onnx.preview node 'lstm' (MaskedLSTM) has attribute(s) ['zoneout'] that io.onnx_masked_rnn "
            "MaskedLSTM version 1 lacks",
            id="unknown attribute",
        ),
    ],
)
def test_what_the_package_op_would_not_mean_the_same_by_is_refused_naming_the_node(models, damage, message):
    """By ``from_preview`` and by every entry point that calls it."""
    _, preview, _, _ = models
    damaged = damage(preview)
    for call in (from_preview, attach_functions, inline, kernel.session):
        with pytest.raises(ValueError) as error:
            call(damaged)
        assert message in str(error.value), call


def test_a_preview_version_in_a_function_counts_for_the_nodes_in_it(models):
    """A model-local function's own ai.onnx.preview import decides for the nodes inside it."""
    _, preview, _, _ = models
    damaged = onnx.ModelProto()
    damaged.CopyFrom(preview)
    encoder = next(f for f in damaged.functions if f.name == "Encoder")
    next(o for o in encoder.opset_import if o.domain == PREVIEW_DOMAIN).version = 3
    with pytest.raises(
        ValueError, match=r"node 'gru' \(MaskedGRU\): ai.onnx.preview is imported at version 3"
    ):
        from_preview(damaged)


def test_too_many_inputs_are_refused_naming_the_node(models):
    _, preview, _, _ = models
    damaged = onnx.ModelProto()
    damaged.CopyFrom(preview)
    damaged.graph.node[0].input.append("extra")
    with pytest.raises(ValueError, match=r"node 'lstm' \(MaskedLSTM\) has 10 inputs; .* takes at most 9"):
        from_preview(damaged)


@pytest.mark.parametrize("strategy", ["function", "scan", "native"])
def test_the_command_line_writes_each_deployment_form(models, strategy, tmp_path, capsys):
    _, preview, feeds, expected = models
    onnx.save(preview, tmp_path / "tf2onnx.onnx")
    argv = [
        "from-preview",
        str(tmp_path / "tf2onnx.onnx"),
        str(tmp_path / "out.onnx"),
        "--strategy",
        strategy,
    ]
    assert cli.main(argv) == 0
    assert f"(3 masked node(s), {strategy} form)" in capsys.readouterr().out
    written = onnx.load(tmp_path / "out.onnx")
    assert not has_preview_nodes(written)
    assert_close("onnxruntime, preview model", run(written, feeds), expected, **TOLERANCE)


def test_the_command_line_inline_takes_a_preview_model(models, tmp_path, capsys):
    _, preview, feeds, expected = models
    onnx.save(preview, tmp_path / "tf2onnx.onnx")
    assert (
        cli.main(
            ["inline", str(tmp_path / "tf2onnx.onnx"), str(tmp_path / "out.onnx"), "--strategy", "native"]
        )
        == 0
    )
    assert "(3 masked node(s), native expansion)" in capsys.readouterr().out
    assert_close("onnxruntime, preview model", run(tmp_path / "out.onnx", feeds), expected, **TOLERANCE)


def test_the_command_line_refusal_is_one_line_naming_the_node(models, tmp_path, capsys):
    _, preview, _, _ = models
    onnx.save(_set_preview_version(preview, 2), tmp_path / "v2.onnx")
    assert cli.main(["from-preview", str(tmp_path / "v2.onnx"), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("onnx-masked-rnn from-preview: error: ai.onnx.preview node 'lstm' (MaskedLSTM)")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.onnx").exists()


def test_the_package_exports_the_step():
    assert onnx_masked_rnn.from_preview is from_preview
    assert onnx_masked_rnn.PREVIEW_DOMAIN == "ai.onnx.preview"
