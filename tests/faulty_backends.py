"""Backends that misbehave on purpose, for the conformance runner's tests: each runs models on
onnxruntime, except on a MaskedGRU case, where it dies, hangs or raises as its name says
(``Lacking``: raises the way a runtime the runner does not know says it lacks an op)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import onnx

from onnx_masked_rnn.conformance.backends import OnnxRuntimeBackend


def _is_gru(model: onnx.ModelProto) -> bool:
    return "MaskedGRU" in model.SerializeToString().decode("latin-1")


class _Faulty(OnnxRuntimeBackend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> Any:
        if _is_gru(model):
            cls.misbehave()
        return super().prepare(model, device)


class Segfaulting(_Faulty):
    @staticmethod
    def misbehave() -> None:
        os.kill(os.getpid(), signal.SIGSEGV)


class Hanging(_Faulty):
    @staticmethod
    def misbehave() -> None:
        time.sleep(3600)


class Raising(_Faulty):
    @staticmethod
    def misbehave() -> None:
        raise RuntimeError("Exception from src/frontend/op.cpp:12:\nthe runtime cannot build this graph")


class Lacking(_Faulty):
    @staticmethod
    def misbehave() -> None:
        raise RuntimeError("Failed to compile: operator 'MaskedGRU' is not implemented by this runtime")


def segfaulting_fuzz_jobs(_: None) -> Callable[[tuple[int, int, str]], tuple[str, str]]:
    """A fuzz worker's job handler whose ``inline scan`` path kills its process as a segfault would."""
    from onnx_masked_rnn import fuzz

    def handle(job: tuple[int, int, str]) -> tuple[str, str]:
        if job[2] == "inline scan":
            os.kill(os.getpid(), signal.SIGSEGV)
        return fuzz.run_job(job)

    return handle
