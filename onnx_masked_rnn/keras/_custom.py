"""Custom Keras classes across processes: what a ``.keras`` file needs to load, and which custom
layers the torch-backend export cannot run.

A ``.keras`` file names each class by its registered name and module (``config.json``); Keras'
``load_model`` finds a class only if it is registered (its module imported) or in
``custom_objects``. :func:`custom_objects_for` resolves every custom class of a file the way a user
would: ``custom_objects`` first, then Keras' registry, then the recorded module (imported), then the
running script. A child process cannot import the script (``__main__``), so :func:`child_specs`
refuses such classes by name; :func:`load_specs` is the child's side.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from onnx_masked_rnn.keras.layers import UnsupportedLayerError

__all__ = [
    "SavedClass",
    "backend_calls",
    "check_backend_calls",
    "child_specs",
    "custom_objects_for",
    "load_specs",
    "saved_classes",
]

# Libraries a layer may not call directly: the export runs the layer's code on torch tensors.
_BACKEND_LIBRARIES = ("tensorflow", "jax", "jaxlib", "tf_keras")
_SCRIPT_ADVICE = (
    "define it in a module the export can import (then nothing else is needed), or run the script with "
    "KERAS_BACKEND=torch set before Keras is imported (the export then runs in the script's process)"
)


@dataclasses.dataclass(frozen=True)
class SavedClass:
    """A custom class as a ``.keras`` file records it."""

    class_name: str
    registered_name: str
    module: str | None
    """``None`` for a class defined in the script that saved the model (``__main__``)."""


def _walk(value: Any) -> Iterator[dict]:
    if isinstance(value, dict):
        if isinstance(value.get("class_name"), str) and "module" in value and "config" in value:
            yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def saved_classes(path: str | Path) -> list[SavedClass]:
    """The classes of a ``.keras`` file that are not Keras' own (none for other formats)."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return []  # not a .keras archive: load_model reports what it is
    found: dict[str, SavedClass] = {}
    for entry in _walk(config):
        module = entry.get("module")
        if module == "keras" or (isinstance(module, str) and module.startswith("keras.")):
            continue
        if entry["class_name"] == "function" or module == "builtins":
            continue  # functions: refused as activations after loading, or loaded by Keras
        name = entry.get("registered_name") or entry["class_name"]
        found.setdefault(name, SavedClass(entry["class_name"], name, module))
    return list(found.values())


def _from_script(saved: SavedClass) -> type | None:
    script = sys.modules.get("__main__")
    found = getattr(script, saved.class_name, None)
    return found if isinstance(found, type) else None


def _resolve(saved: SavedClass, keras: Any) -> type:
    registered = keras.saving.get_registered_object(saved.registered_name)
    if registered is not None:
        return registered
    if saved.module in (None, "__main__"):
        found = _from_script(saved)
        if found is None:
            raise ValueError(
                f"MODEL: class {saved.class_name!r} was defined in the script that saved the model "
                f"(__main__), which this process cannot import: {_SCRIPT_ADVICE}, or pass "
                f"custom_objects={{{saved.registered_name!r}: {saved.class_name}}}"
            )
        return found
    try:
        module = importlib.import_module(saved.module)
    except ImportError as exc:
        raise ValueError(
            f"MODEL: class {saved.class_name!r} needs module {saved.module!r}, which cannot be "
            f"imported here ({exc}): make it importable (PYTHONPATH) or pass "
            f"custom_objects={{{saved.registered_name!r}: {saved.class_name}}}"
        ) from exc
    registered = keras.saving.get_registered_object(saved.registered_name)  # registered on import
    found = registered or getattr(module, saved.class_name, None)
    if not isinstance(found, type):
        raise ValueError(
            f"MODEL: module {saved.module!r} has no class {saved.class_name!r}; pass "
            f"custom_objects={{{saved.registered_name!r}: <the class>}}"
        )
    return found


def custom_objects_for(path: str | Path, given: Mapping[str, Any] | None, keras: Any) -> dict[str, Any]:
    """``custom_objects`` for ``keras.saving.load_model(path)``: ``given`` plus every custom class
    of the file that ``given`` does not name, resolved (ValueError naming the class if it cannot be)."""
    objects = dict(given or {})
    for saved in saved_classes(path):
        if saved.registered_name not in objects and saved.class_name not in objects:
            objects[saved.registered_name] = _resolve(saved, keras)
    return objects


def child_specs(path: str | Path, given: Mapping[str, Any] | None, keras: Any) -> list[str]:
    """``NAME=MODULE:QUALNAME`` for each custom class of the file, which a child process imports
    (:func:`load_specs`); refuses, naming it, a class the child cannot import or run."""
    specs = []
    for name, value in custom_objects_for(path, given, keras).items():
        if not isinstance(value, type):
            continue  # a function: loaded by name, or refused later as an activation
        if value.__module__ == "__main__" or "<locals>" in value.__qualname__:
            where = (
                "in the script itself (__main__)" if value.__module__ == "__main__" else "inside a function"
            )
            raise ValueError(
                f"class {value.__qualname__!r} is defined {where}, which the export's torch-backend "
                f"child process cannot import: {_SCRIPT_ADVICE}"
            )
        problem = backend_calls(value)
        if problem:
            raise UnsupportedLayerError(f"class {value.__qualname__!r}: {problem}")
        specs.append(f"{name}={value.__module__}:{value.__qualname__}")
    return specs


def load_specs(specs: list[str]) -> dict[str, Any]:
    """The ``custom_objects`` that :func:`child_specs` describes (imports each module)."""
    objects = {}
    for spec in specs:
        name, sep, target = spec.rpartition("=")
        module_name, colon, qualname = target.partition(":")
        if not (sep and colon and name and module_name and qualname):
            raise ValueError(f"--custom-object: expected NAME=MODULE:QUALNAME, got {spec!r}")
        try:
            value: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"--custom-object {spec!r}: cannot import {target} ({exc})") from exc
        objects[name] = value
    return objects


def backend_calls(cls: type) -> str | None:
    """What in ``cls``'s own code (its methods and their globals) uses TensorFlow or JAX directly,
    which a torch-backend export cannot run; ``None`` when nothing does."""
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in ("keras", "builtins", "torch", *_BACKEND_LIBRARIES):
            continue  # Keras' own classes and the backends' bases of Layer
        for attribute, function in vars(klass).items():
            if not inspect.isfunction(function):
                continue
            try:
                names = inspect.getclosurevars(function)
            except (TypeError, ValueError):
                continue
            for global_name, value in {**names.globals, **names.nonlocals}.items():
                owner = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
                library = owner.split(".")[0] if isinstance(owner, str) else ""
                if library in _BACKEND_LIBRARIES:
                    return (
                        f"{klass.__qualname__}.{attribute}() calls {library} directly ({global_name!r}); "
                        "the export runs the layer on Keras' torch backend, where only keras.ops work: "
                        "write it with keras.ops, or export on TensorFlow with Keras' own "
                        'model.export(path, format="onnx") (tf2onnx)'
                    )
    return None


def check_backend_calls(model: Any) -> None:
    """Refuse, naming the layer and its class, a layer whose own code calls TensorFlow or JAX."""
    for layer in model._flatten_layers(include_self=True, recursive=True):
        problem = backend_calls(type(layer))
        if problem:
            raise UnsupportedLayerError(f"layer {layer.name!r} ({type(layer).__name__}): {problem}")
