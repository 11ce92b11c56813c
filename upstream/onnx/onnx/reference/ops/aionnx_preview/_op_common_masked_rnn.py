# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the reference implementations of MaskedLSTM, MaskedGRU and MaskedRNN share.

:class:`CommonMaskedRNN` validates the inputs and attributes, resolves the activation functions
and runs one masked recurrence per direction (:func:`masked_recurrence`) with the cell its
subclass defines (op_masked_lstm.py, op_masked_gru.py, op_masked_rnn.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from onnx.reference.op_run import OpRun

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# name -> (takes alpha, takes beta, default alpha, default beta)
_ACTIVATIONS: dict[str, tuple[bool, bool, float, float]] = {
    "Relu": (False, False, 0.0, 0.0),
    "Tanh": (False, False, 0.0, 0.0),
    "Sigmoid": (False, False, 0.0, 0.0),
    "Affine": (True, True, 1.0, 0.0),
    "LeakyRelu": (True, False, 0.01, 0.0),
    "ThresholdedRelu": (True, False, 1.0, 0.0),
    "ScaledTanh": (True, True, 1.0, 1.0),
    "HardSigmoid": (True, True, 0.2, 0.5),
    "Elu": (True, False, 1.0, 0.0),
    "Softsign": (False, False, 0.0, 0.0),
    "Softplus": (False, False, 0.0, 0.0),
}

_FUNCTIONS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "Relu": lambda x, a, b: np.maximum(x, 0),  # noqa: ARG005
    "Tanh": lambda x, a, b: np.tanh(x),  # noqa: ARG005
    "Sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),  # noqa: ARG005
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),  # noqa: ARG005
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0),  # noqa: ARG005
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)),  # noqa: ARG005
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),  # noqa: ARG005
    "Softplus": lambda x, a, b: np.maximum(x, 0) + np.log(1 + np.exp(-np.abs(x))),  # noqa: ARG005
}
_BY_LOWER = {name.lower(): name for name in _ACTIVATIONS}


def _activations(
    names: Sequence[str | bytes] | None,
    alphas: Sequence[float] | None,
    betas: Sequence[float] | None,
    defaults: Sequence[str],
    num_directions: int,
) -> list[list[Callable[[np.ndarray], np.ndarray]]]:
    """Each direction's activation functions, ``activation_alpha``/``activation_beta`` consumed
    in order by the functions that take them, defaults for the rest.
    """
    per_direction = len(defaults)
    if names is None:
        names = list(defaults) * num_directions
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    # RNN-22 declares the default ["Tanh", "Tanh"]: a one-direction RNN uses the first.
    if per_direction == 1 and num_directions == 1 and len(names) == 2:
        names = names[:1]
    if len(names) != per_direction * num_directions:
        raise ValueError(
            f"Attribute 'activations' must list {per_direction * num_directions} functions, got {names}."
        )
    alphas, betas = list(alphas or []), list(betas or [])
    functions = []
    for raw in names:
        name = _BY_LOWER.get(raw.lower())
        if name is None:
            raise ValueError(
                f"Attribute 'activations' has unknown function {raw!r}, expected one of {sorted(_ACTIVATIONS)}."
            )
        takes_alpha, takes_beta, alpha, beta = _ACTIVATIONS[name]
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        functions.append(
            lambda x, fn=_FUNCTIONS[name], a=alpha, b=beta: fn(
                x, x.dtype.type(a), x.dtype.type(b)
            ).astype(x.dtype)
        )
    return [
        functions[d * per_direction : (d + 1) * per_direction]
        for d in range(num_directions)
    ]


def masked_recurrence(
    cell: Callable[[np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]],
    xw: np.ndarray,
    state: tuple[np.ndarray, ...],
    mask: np.ndarray,
    reverse: bool,
    masked_output: str,
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """One direction: ``xw`` [T, N, G*H] input projections, ``mask`` [T, N] effective mask.

    A masked step leaves the state untouched; ``Y`` there is 0 ("zero") or the previous output of
    this direction, 0 before the first processed step ("carry"). Returns time-aligned ``Y``
    [T, N, H] and the final state.
    """
    Y = np.zeros((xw.shape[0], *state[0].shape), dtype=state[0].dtype)
    previous_y = np.zeros_like(state[0])
    steps = range(xw.shape[0])
    for t in reversed(steps) if reverse else steps:
        m = mask[t][:, None]
        new_state = cell(xw[t], state)
        state = tuple(
            np.where(m, new, old) for new, old in zip(new_state, state, strict=True)
        )
        if masked_output == "carry":
            previous_y = np.where(m, new_state[0], previous_y)
            Y[t] = previous_y
        else:
            Y[t] = np.where(m, new_state[0], 0)
    return Y, state


class CommonMaskedRNN(OpRun):
    num_gates: int
    default_activations: tuple[str, ...]

    def _cell(self, R, Rb, P, functions, clip, input_forget, linear_before_reset):
        raise NotImplementedError

    def _common(
        self,
        X,
        W,
        R,
        B,
        sequence_lens,
        initial_h,
        initial_c,
        P,
        mask,
        activation_alpha,
        activation_beta,
        activations,
        clip,
        direction,
        input_forget,
        layout,
        linear_before_reset,
        masked_output,
    ) -> tuple[np.ndarray, ...]:
        masked_output = _text(masked_output)
        direction = _text(direction)
        if masked_output not in ("zero", "carry"):
            raise ValueError(
                f"Attribute 'masked_output' must be one of 'zero', 'carry', got {masked_output!r}."
            )
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"Attribute 'direction' has unknown value {direction!r}.")
        if mask is not None and (mask.dtype != np.bool_ or mask.shape != X.shape[:2]):
            raise ValueError(
                f"Input 'mask' must be a bool tensor of the shape of the first two axes of X "
                f"{list(X.shape[:2])}, got {mask.dtype} {list(mask.shape)}."
            )
        num_directions = 2 if direction == "bidirectional" else 1
        functions = _activations(
            activations,
            activation_alpha,
            activation_beta,
            self.default_activations,
            num_directions,
        )
        dtype = X.dtype
        # float16 and bfloat16 are computed in float32 and rounded once at the end.
        compute = np.float32 if dtype not in (np.float32, np.float64) else dtype
        if layout:
            X = np.swapaxes(X, 0, 1)
            mask = None if mask is None else mask.T
            initial_h = None if initial_h is None else np.swapaxes(initial_h, 0, 1)
            initial_c = None if initial_c is None else np.swapaxes(initial_c, 0, 1)
        T, N = X.shape[:2]
        H = R.shape[-1]
        effective = np.ones((T, N), dtype=bool) if mask is None else mask
        if sequence_lens is not None:
            if ((sequence_lens < 0) | (sequence_lens > T)).any():
                raise ValueError(
                    f"Input 'sequence_lens' must lie in [0, seq_length={T}], got {sequence_lens.tolist()}."
                )
            effective = effective & (np.arange(T)[:, None] < sequence_lens[None, :])

        X = X.astype(compute)
        W, R = W.astype(compute), R.astype(compute)
        B = (
            np.zeros((num_directions, 2 * self.num_gates * H), compute)
            if B is None
            else B.astype(compute)
        )
        zeros = np.zeros((num_directions, N, H), compute)
        initial_h = zeros if initial_h is None else initial_h.astype(compute)
        initial_c = zeros if initial_c is None else initial_c.astype(compute)
        ys, finals = [], []
        with np.errstate(
            all="ignore"
        ):  # values at masked steps may overflow; they are discarded
            for d in range(num_directions):
                Wb, Rb = np.split(B[d], 2)
                bias = Wb + Rb
                if linear_before_reset:  # GRU: Rbh is added to Ht-1·Rhᵀ inside the cell
                    bias[2 * H :] = Wb[2 * H :]
                cell = self._cell(
                    R[d],
                    Rb,
                    None if P is None else P[d].astype(compute),
                    functions[d],
                    clip,
                    input_forget,
                    linear_before_reset,
                )
                state = (
                    (initial_h[d], initial_c[d])
                    if self.num_gates == 4
                    else (initial_h[d],)
                )
                reverse = direction == "reverse" or d == 1
                y, final = masked_recurrence(
                    cell, X @ W[d].T + bias, state, effective, reverse, masked_output
                )
                ys.append(y)
                finals.append(final)
        Y = np.stack(ys, axis=1)  # [T, D, N, H]
        states = [
            np.stack(s, axis=0) for s in zip(*finals, strict=True)
        ]  # [D, N, H] each
        if layout:
            Y = np.transpose(Y, [2, 0, 1, 3])
            states = [np.swapaxes(s, 0, 1) for s in states]
        return tuple(o.astype(dtype) for o in (Y, *states))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def clipper(clip: float | None) -> Callable[[np.ndarray], np.ndarray]:
    if clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)
