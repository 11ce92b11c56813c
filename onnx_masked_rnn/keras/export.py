"""``export(model, path)``: a Keras 3 model with masked recurrent layers as an exact ONNX model.

The route: Keras 3 on its torch backend, where every layer is a ``torch.nn.Module``. For the
duration of the export each recurrent layer's ``inner_loop`` (the time loop that ``RNN.call`` runs
after it has resolved the initial state and the mask) is replaced by one call of the
:mod:`onnx_masked_rnn.torch` custom op, fed with the layer's weights in ONNX form
(:func:`~onnx_masked_rnn.keras.layers.convert_layer`); ``torch.onnx.export(dynamo=True)`` converts
everything else (Embedding, Masking, Dense, TimeDistributed, merges, ...) with dynamic batch and
time, and translates the custom op into one masked node.

What the replacement computes is what Keras' torch backend computes (``backend/torch/rnn.py``):
masked steps keep the state and repeat the previous output (``"carry"``) unless the layer has
``zero_output_for_mask`` (``Bidirectional`` with ``return_sequences``: ``"zero"``); a
``go_backwards`` layer returns its outputs in processing order; the last output is the last
processed step's. A ``Bidirectional`` therefore becomes two masked nodes, one per direction, each
the direction's own layer (so directions may differ in anything Keras allows).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn._files import write_atomic
from onnx_masked_rnn.extras import installed, missing_dependency
from onnx_masked_rnn.keras._backend import import_keras
from onnx_masked_rnn.keras._custom import check_backend_calls, child_specs, custom_objects_for
from onnx_masked_rnn.keras.layers import ExportWarning

__all__ = [
    "STRATEGIES",
    "SUPPORTED_KERAS",
    "WARNING_PREFIX",
    "ExportSummary",
    "export",
    "summarize",
]

STRATEGIES = ("function", "scan", "native")
# Keras 3 layers have the RNN.inner_loop this module replaces since 3.0; the version tested (and pinned
# in CI) is 3.15.1.
SUPPORTED_KERAS = "3.x (tested: 3.15.1)"


@dataclasses.dataclass(frozen=True)
class ExportSummary:
    """What :func:`export` wrote."""

    path: str
    strategy: str
    nodes: int
    """Nodes of the main graph."""
    masked_nodes: int
    """MaskedLSTM/GRU/RNN nodes of the main graph (0 after ``"scan"``/``"native"`` inlining)."""
    inputs: dict[str, list[int | str]]
    """Each graph input's shape; a string is a dynamic axis."""
    seconds: float

    def __str__(self) -> str:
        shapes = ", ".join(f"{name}[{', '.join(map(str, dims))}]" for name, dims in self.inputs.items())
        return (
            f"wrote {self.path} ({self.strategy}): {self.nodes} nodes, {self.masked_nodes} masked, "
            f"inputs {shapes}, {self.seconds:.1f} s"
        )


def summarize(model: onnx.ModelProto, path: str, strategy: str, seconds: float) -> ExportSummary:
    """The :class:`ExportSummary` of an exported model."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
        if i.name not in initializers
    }
    masked = sum(node.domain == DOMAIN for node in model.graph.node)
    return ExportSummary(str(path), strategy, len(model.graph.node), masked, inputs, seconds)


def _check_keras3(model: Any, keras: Any) -> None:
    """Refuse, saying what is needed, a model that is not a Keras 3 model (tf_keras / Keras 2)."""
    if isinstance(model, keras.Model):
        return
    module = type(model).__module__
    if module.split(".")[0] in ("tf_keras", "keras", "tensorflow"):
        raise ValueError(
            f"MODEL: a Keras 2 model ({module}.{type(model).__name__}: tf_keras or tf.keras before "
            f"TensorFlow 2.16); export needs a Keras 3 model (keras>=3: rebuild the architecture with "
            f"Keras 3 and copy the weights, e.g. set_weights(old.get_weights())), or take the tf2onnx "
            f"route for Keras 2 (tf2onnx.convert.from_keras; masked layers become a Loop)"
        )
    raise ValueError(
        f"MODEL: expected a Keras 3 model or the path of a .keras file; got {type(model).__name__}"
    )


def export(
    model: Any,
    path: str | os.PathLike[str],
    *,
    strategy: str = "function",
    input_signature: Sequence[tuple[Sequence[int | None], str]] | None = None,
    custom_objects: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportSummary:
    """Write ``model`` (a Keras 3 model or the path of a ``.keras`` file) to ``path`` as ONNX.

    Each ``LSTM``, ``GRU``, ``SimpleRNN`` (or ``RNN`` over one of their cells) becomes one masked
    node; a ``Bidirectional`` two, one per direction. Every axis the Keras inputs leave ``None``
    (batch, time) stays dynamic; so do the batch and time of a ``Sequential`` built by calling it on
    data (whose input Keras fixes at the first call's shape), unless a layer needs them fixed (a
    warning names it). ``strategy``: ``"function"`` keeps the masked nodes and attaches
    their bodies as model-local functions (runs in onnxruntime as is); ``"scan"`` and ``"native"``
    replace them by standard ops (:func:`onnx_masked_rnn.inline`), ``"native"`` being the fast
    deployment form on the native LSTM/GRU/RNN kernels.

    ``input_signature``: ``[(shape, dtype), ...]`` for a model whose ``inputs`` Keras does not know
    (subclassed); ``None`` marks a dynamic axis. ``custom_objects``: as for
    ``keras.saving.load_model``, for custom classes that are neither registered nor importable from
    the module the file records. ``progress`` receives one line per stage.

    The export runs on Keras' torch backend. When Keras was imported with another backend, the
    model is saved as ``.keras`` and exported in a child process with ``KERAS_BACKEND=torch``, which
    imports the modules of the model's custom classes (a class defined in the script itself cannot
    be imported there: the error names it and says what to do); when Keras is not imported yet,
    ``KERAS_BACKEND`` defaults to ``torch``.

    Raises :class:`~onnx_masked_rnn.keras.UnsupportedLayerError` (naming the layer and why) for what
    the ops cannot compute exactly: a custom cell, a convolutional recurrent layer, an activation
    with no exact ONNX form, ``stateful=True``, a custom layer whose code calls TensorFlow or JAX.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if not installed("torch"):  # the export runs on Keras' torch backend, whatever this process's is
        raise missing_dependency("the Keras export (onnx_masked_rnn.keras.export)", "torch", "keras")
    report = progress or (lambda line: None)
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = import_keras()

    start = time.perf_counter()
    if isinstance(model, str | os.PathLike):
        if not Path(model).is_file():
            raise FileNotFoundError(f"MODEL: no such file {str(model)!r}")
    else:
        _check_keras3(model, keras)
        check_backend_calls(model)
    if keras.backend.backend() != "torch":
        if input_signature is not None:
            raise ValueError(
                "input_signature needs the torch backend in this process: set KERAS_BACKEND=torch "
                "before importing keras"
            )
        with tempfile.TemporaryDirectory() as folder:
            if not isinstance(model, str | os.PathLike):
                saved = Path(folder) / "model.keras"
                model.save(saved)
                model = saved
            specs = child_specs(model, custom_objects, keras)
            _export_in_child(model, path, strategy, specs, report)
        return summarize(
            onnx.load(path, load_external_data=False), str(path), strategy, time.perf_counter() - start
        )
    if isinstance(model, str | os.PathLike):
        report(f"loading {model}")
        objects = custom_objects_for(model, custom_objects, keras)
        try:
            model = keras.saving.load_model(model, custom_objects=objects, compile=False)
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise ValueError(f"MODEL: {str(model)!r} is not a readable Keras model: {exc}") from exc
        check_backend_calls(model)
    from onnx_masked_rnn.keras._trace import trace

    onnx_model = trace(model, input_signature, strategy, report)
    write_atomic(Path(path), onnx_model.SerializeToString())  # whole or not at all
    return summarize(onnx_model, str(path), strategy, time.perf_counter() - start)


# What the child prints before a warning (cli.py), re-issued in the parent.
WARNING_PREFIX = "onnx-masked-rnn convert: warning: "


def _export_in_child(
    model: Path | str | os.PathLike[str],
    path: Any,
    strategy: str,
    specs: Sequence[str],
    report: Callable[[str], None],
) -> None:
    """Run ``onnx-masked-rnn convert`` with ``KERAS_BACKEND=torch`` on a ``.keras`` file, the
    custom classes given as ``--custom-object`` and this process's ``sys.path`` (so the child imports
    what this process can); the child's warnings are re-issued here."""
    report(f"Keras runs on another backend here: exporting {model} in a child process (torch backend)")
    command = [
        sys.executable,
        "-m",
        "onnx_masked_rnn",
        "convert",
        str(model),
        str(path),
        "--strategy",
        strategy,
    ]
    for spec in specs:
        command += ["--custom-object", spec]
    search_path = [entry or os.getcwd() for entry in sys.path]
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": os.pathsep.join(search_path)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    for line in done.stderr.splitlines():
        if line.startswith(WARNING_PREFIX):
            warnings.warn(line[len(WARNING_PREFIX) :], ExportWarning, stacklevel=3)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        raise RuntimeError(
            "the export in a child process (Keras on the torch backend) failed: "
            + ("\n".join(errors) if errors else done.stderr.strip())
        )
