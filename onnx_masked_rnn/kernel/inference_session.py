"""``session(model)``: an onnxruntime session that runs the model's masked nodes on the kernel.

``ai.onnx.preview`` masked nodes (what patched tf2onnx emits) are made the package's first
(``preview.from_preview``). Every MaskedLSTM/GRU/RNN node (main graph, Loop/If/Scan bodies,
model-local functions) is asked :func:`~onnx_masked_rnn.kernel.coverage.uncovered`; a node the
kernel does not cover is rewritten by :func:`onnx_masked_rnn.inline` (``"native"`` for float32 and
float16, whose native kernels onnxruntime has, ``"scan"`` otherwise) before the session is made,
and a :class:`KernelFallbackWarning` names each such node and why. The other nodes are kept and run on
the kernel. (onnxruntime never falls back from a registered kernel by itself: see ``coverage``.)
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import onnx
import onnxruntime as ort

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._walk import graphs, walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS
from onnx_masked_rnn.inline import inline
from onnx_masked_rnn.kernel.coverage import uncovered
from onnx_masked_rnn.kernel.library import register
from onnx_masked_rnn.preview import from_preview, has_preview_nodes
from onnx_masked_rnn.schemas import registered_schemas

__all__ = ["KernelFallbackWarning", "session"]

_KEPT = DOMAIN + ".kernel"  # the covered nodes' domain while ``inline`` rewrites the others


class KernelFallbackWarning(UserWarning):
    """A masked node runs as standard ONNX ops (``inline``), not on the kernel."""


def _masked_nodes(model: onnx.ModelProto) -> Iterator[tuple[bool, onnx.NodeProto]]:
    """Every masked node, with whether it is in the main graph (or its subgraphs)."""
    for node in walk_nodes(model.graph.node):
        if node.domain == DOMAIN and node.op_type in OP_SPECS:
            yield True, node
    for function in model.functions:
        if function.domain == DOMAIN and function.name in OP_SPECS:
            continue  # a masked op's own body (attach_functions): onnxruntime runs the kernel instead
        for node in walk_nodes(function.node):
            if node.domain == DOMAIN and node.op_type in OP_SPECS:
                yield False, node


def _inferred(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """``model`` with the value types onnx's shape inference (with the package's schemas) finds,
    and the element type of every value of its main graph and subgraphs."""
    with registered_schemas():
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception:  # a best effort: the types the model states still count
            model = onnx.ModelProto.FromString(model.SerializeToString())
    types: dict[str, int] = {}
    for graph in graphs(model.graph):
        types.update((i.name, i.data_type) for i in graph.initializer)
        for info in (*graph.input, *graph.value_info, *graph.output):
            types[info.name] = info.type.tensor_type.elem_type
    return model, types


def _describe(node: onnx.NodeProto) -> str:
    return f"node {node.name!r} ({node.op_type})" if node.name else f"an unnamed {node.op_type} node"


def _all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from walk_nodes(model.graph.node)
    for function in model.functions:
        yield from walk_nodes(function.node)


def _rewrite_uncovered(model: onnx.ModelProto, stacklevel: int) -> onnx.ModelProto | None:
    """``model`` with the nodes the kernel does not cover inlined (warning which and why), or None
    when it covers them all."""
    model, types = _inferred(model)
    found: list[tuple[onnx.NodeProto, str, str]] = []  # node, reason, inline strategy
    for in_main, node in _masked_nodes(model):
        x_type = types.get(node.input[0], 0) if in_main and node.input else onnx.TensorProto.UNDEFINED
        reason = uncovered(node, x_type)
        if reason is not None:
            native = x_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
            found.append((node, reason, "native" if native else "scan"))
    if not found:
        return None
    warnings.warn(
        "onnx_masked_rnn.kernel.session: "
        + "; ".join(
            f"{_describe(n)} runs as inline(model, {s!r}), not on the kernel: {r}" for n, r, s in found
        ),
        KernelFallbackWarning,
        stacklevel=stacklevel,
    )
    # inline() rewrites every masked node it sees: while it runs for one strategy, the nodes the
    # kernel keeps and those of the other strategy are under domains of their own.
    for _, node in _masked_nodes(model):
        node.domain = _KEPT
    for node, _, strategy in found:
        node.domain = f"{_KEPT}.{strategy}"
    for strategy in dict.fromkeys(s for _, _, s in found):
        for node in _all_nodes(model):
            if node.domain == f"{_KEPT}.{strategy}":
                node.domain = DOMAIN
        model = inline(model, strategy)
    for node in _all_nodes(model):
        if node.domain == _KEPT:
            node.domain = DOMAIN
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, OPSET_VERSION))
    return model


def session(
    model: onnx.ModelProto | bytes | str | os.PathLike,
    sess_options: Any = None,
    providers: Sequence[Any] | None = None,
    **kwargs: Any,
) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model`` (a ``ModelProto``, its bytes or a path)
    with the kernel registered in ``sess_options`` (a new ``SessionOptions`` when None);
    ``providers`` and ``kwargs`` go to ``InferenceSession``.

    ``ai.onnx.preview`` masked nodes (tf2onnx's) run as the package's
    (:func:`~onnx_masked_rnn.preview.from_preview`). A masked node the kernel does not cover is
    inlined first, with a :class:`KernelFallbackWarning` naming it and why (module docstring). Raises
    :class:`~onnx_masked_rnn.kernel.library.KernelNotBuiltError` when the package was installed
    without the kernel.
    """
    options = ort.SessionOptions() if sess_options is None else sess_options
    register(options)
    if isinstance(model, onnx.ModelProto):
        proto, source = model, None
    elif isinstance(model, bytes):
        proto, source = onnx.ModelProto.FromString(model), model
    else:
        path = os.fspath(model)
        proto, source = onnx.load(path, load_external_data=False), path
    if has_preview_nodes(proto):  # tf2onnx's ai.onnx.preview nodes: the kernel runs them as the package's
        proto, source = from_preview(proto), None
    rewritten = _rewrite_uncovered(proto, stacklevel=3)
    if rewritten is not None:
        source = rewritten.SerializeToString()
    elif source is None:
        source = proto.SerializeToString()
    return ort.InferenceSession(source, options, providers=providers, **kwargs)
