"""Walking ONNX graphs into the bodies of Loop, If and Scan at any depth."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (one level down)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in it, at any depth."""
    yield graph
    for node in graph.node:
        for g in subgraphs(node):
            yield from graphs(g)


def walk_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """``nodes`` and every node of their subgraphs, at any depth, depth first."""
    for node in nodes:
        yield node
        for g in subgraphs(node):
            yield from walk_nodes(g.node)
