"""The ``ai.onnx.preview`` masked operators (what patched tf2onnx emits) onto the package's domain.

The onnx patch series (``upstream/``) defines MaskedLSTM, MaskedGRU and MaskedRNN in
``ai.onnx.preview`` version 1 with the inputs, outputs and attributes of the package's ops (LSTM-22,
GRU-22, RNN-22, plus ``mask`` and ``masked_output``); the tf2onnx series (``upstream/tf2onnx/``)
emits those nodes with their bodies, from onnx's schema, as model-local functions. Until an onnx
release has the schemas, :func:`from_preview` maps such a model onto :data:`~onnx_masked_rnn.DOMAIN`:
every preview MaskedLSTM/GRU/RNN node (main graph, Loop/If/Scan bodies, model-local functions)
becomes the package's node, keeping its inputs, outputs and attributes; the preview bodies it called
and the preview import are dropped once unused. ``attach_functions``, ``inline`` and
``kernel.session`` (and the command line's ``inline`` and ``from-preview``) call it first, so they
take tf2onnx's model as it is.

A model importing ``ai.onnx.preview`` at another version, or a preview node with an attribute, an
input or an output the package's op lacks, is refused with a ``ValueError`` naming the node: a later
version may mean something else, and nothing is mapped on a guess.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx
from onnx import helper

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS

__all__ = ["PREVIEW_DOMAIN", "PREVIEW_VERSION", "from_preview", "has_preview_nodes"]

PREVIEW_DOMAIN = "ai.onnx.preview"
PREVIEW_VERSION = 1
"""The only version of ``ai.onnx.preview`` whose masked operators the package's ops are."""


def _is_preview_op(node: onnx.NodeProto) -> bool:
    return node.domain == PREVIEW_DOMAIN and node.op_type in OP_SPECS


def _is_preview_body(function: onnx.FunctionProto) -> bool:
    return function.domain == PREVIEW_DOMAIN and function.name in OP_SPECS


def _scopes(
    model: onnx.ModelProto,
) -> Iterator[tuple[onnx.ModelProto | onnx.FunctionProto, list[onnx.NodeProto]]]:
    """The model's main graph and each model-local function other than a preview body, each with
    every node in it (subgraphs at any depth)."""
    yield model, list(walk_nodes(model.graph.node))
    for function in model.functions:
        if not _is_preview_body(function):
            yield function, list(walk_nodes(function.node))


def has_preview_nodes(model: onnx.ModelProto) -> bool:
    """Whether ``model`` holds an ``ai.onnx.preview`` MaskedLSTM/GRU/RNN node anywhere."""
    return any(_is_preview_op(node) for _, nodes in _scopes(model) for node in nodes)


def _describe(node: onnx.NodeProto) -> str:
    name = repr(node.name) if node.name else "(unnamed)"
    return f"{PREVIEW_DOMAIN} node {name} ({node.op_type})"


def _check(node: onnx.NodeProto, version: int) -> None:
    """Refuse what the package's op would not mean the same by (naming the node)."""
    spec = OP_SPECS[node.op_type]
    if version != PREVIEW_VERSION:
        raise ValueError(
            f"{_describe(node)}: {PREVIEW_DOMAIN} is imported at version {version}; only version "
            f"{PREVIEW_VERSION}'s {node.op_type} is the package's {DOMAIN} {node.op_type}"
        )
    unknown = sorted({a.name for a in node.attribute} - set(spec.attribute_names))
    if unknown:
        raise ValueError(
            f"{_describe(node)} has attribute(s) {unknown} that {DOMAIN} {node.op_type} "
            f"version {OPSET_VERSION} lacks; its attributes are {list(spec.attribute_names)}"
        )
    if len(node.input) > len(spec.inputs):
        raise ValueError(
            f"{_describe(node)} has {len(node.input)} inputs; {DOMAIN} {node.op_type} takes at most "
            f"{len(spec.inputs)} {list(spec.inputs)}"
        )
    if len(node.output) > len(spec.outputs):
        raise ValueError(
            f"{_describe(node)} has {len(node.output)} outputs; {DOMAIN} {node.op_type} has at most "
            f"{len(spec.outputs)} {list(spec.outputs)}"
        )


def _versions(scope: onnx.ModelProto | onnx.FunctionProto) -> dict[str, int]:
    return {o.domain: o.version for o in scope.opset_import}


def _update_imports(scope: onnx.ModelProto | onnx.FunctionProto, nodes: list[onnx.NodeProto]) -> None:
    """Import the package's domain where its nodes now are (in the preview import's place, when that
    is unused: the imports keep their order) and drop the preview import once unused."""
    domains = {node.domain for node in nodes}
    needed = DOMAIN in domains and DOMAIN not in _versions(scope)
    imports: list[onnx.OperatorSetIdProto] = []
    for opset in scope.opset_import:
        if opset.domain != PREVIEW_DOMAIN or PREVIEW_DOMAIN in domains:
            imports.append(opset)
        elif needed:
            imports.append(helper.make_opsetid(DOMAIN, OPSET_VERSION))
            needed = False
    if needed:
        imports.append(helper.make_opsetid(DOMAIN, OPSET_VERSION))
    del scope.opset_import[:]
    scope.opset_import.extend(imports)


def from_preview(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return ``model`` with every ``ai.onnx.preview`` MaskedLSTM/GRU/RNN node made the package's
    node (same inputs, outputs and attributes; its ``overload`` cleared), the preview bodies they
    called and the preview import dropped once unused, and the package's domain imported.

    The result has the package's masked nodes without bodies (what the kernel runs); give them
    their bodies with :func:`~onnx_masked_rnn.attach_functions` or expand them with
    :func:`~onnx_masked_rnn.inline`, which both call this first. A model without preview nodes is
    returned as a copy. Raises ``ValueError`` naming the node for a preview version other than 1 and
    for an attribute, input or output the package's op lacks (the module docstring).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if not has_preview_nodes(out):
        return out
    model_version = _versions(out).get(PREVIEW_DOMAIN, PREVIEW_VERSION)
    for scope, nodes in _scopes(out):
        version = _versions(scope).get(PREVIEW_DOMAIN, model_version)
        for node in filter(_is_preview_op, nodes):
            _check(node, version)
    for _, nodes in _scopes(out):
        for node in filter(_is_preview_op, nodes):
            node.domain = DOMAIN
            node.ClearField("overload")
    kept = [f for f in out.functions if not _is_preview_body(f)]
    del out.functions[:]
    out.functions.extend(kept)
    scopes = list(_scopes(out))
    for scope, nodes in scopes[1:]:
        if DOMAIN in {node.domain for node in nodes}:
            _update_imports(scope, nodes)
    _update_imports(out, [node for _, nodes in scopes for node in nodes])  # functions use its imports too
    return out
