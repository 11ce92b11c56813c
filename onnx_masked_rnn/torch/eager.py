"""The operators' semantics in torch ops: what the custom ops compute in eager mode.

The same structure as the numpy reference (:mod:`onnx_masked_rnn.reference.op_masked_rnn`): the
cells are exactly ONNX's LSTM/GRU/RNN cells, and one masking recurrence serves all three.
Vectorised over the batch, a Python loop over time, differentiable (no in-place writes), so autograd
can run through it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from onnx_masked_rnn.attributes import Activation, RNNAttributes

__all__ = ["gru_cell", "lstm_cell", "masked_recurrence", "rnn_cell", "run"]

Tensor = torch.Tensor
State = tuple[Tensor, ...]
Cell = Callable[[Tensor, State], State]

_ACTIVATION_FUNCTIONS: dict[str, Callable[[Tensor, float, float], Tensor]] = {
    "Relu": lambda x, a, b: torch.relu(x),
    "Tanh": lambda x, a, b: torch.tanh(x),
    "Sigmoid": lambda x, a, b: torch.sigmoid(x),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: torch.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: torch.where(x > a, x, torch.zeros_like(x)),
    "ScaledTanh": lambda x, a, b: a * torch.tanh(b * x),
    "HardSigmoid": lambda x, a, b: torch.clamp(a * x + b, 0, 1),
    "Elu": lambda x, a, b: torch.where(x >= 0, x, a * torch.expm1(x)),
    "Softsign": lambda x, a, b: x / (1 + x.abs()),
    "Softplus": lambda x, a, b: torch.logaddexp(x, torch.zeros_like(x)),
}


def _activation(act: Activation) -> Callable[[Tensor], Tensor]:
    fn = _ACTIVATION_FUNCTIONS[act.name]
    return lambda x: fn(x, act.alpha, act.beta)


def _clip(attrs: RNNAttributes) -> Callable[[Tensor], Tensor]:
    if attrs.clip is None:
        return lambda x: x
    return lambda x: torch.clamp(x, -attrs.clip, attrs.clip)


def lstm_cell(attrs: RNNAttributes, d: int, R: Tensor, P: Tensor | None) -> Cell:
    """ONNX LSTM: gates i, o, f, c; peepholes P = [Pi, Po, Pf]; input_forget couples f = 1 - i."""
    f, g, h = (_activation(a) for a in attrs.activations[d])
    clip = _clip(attrs)
    R_t = R.t()
    H = R.shape[1]

    def step(xw: Tensor, state: State) -> State:
        h_prev, c_prev = state
        gates = torch.addmm(xw, h_prev, R_t)
        x_iof, x_c = gates[:, : 3 * H], gates[:, 3 * H :]
        if P is None:  # i, o and f share f and no peephole: one call (fewer autograd nodes)
            i, o, forget = f(clip(x_iof)).chunk(3, dim=-1)
        else:
            p_i, p_o, p_f = P.chunk(3)
            x_i, x_o, x_f = x_iof.chunk(3, dim=-1)
            i, forget = f(clip(x_i + p_i * c_prev)), f(clip(x_f + p_f * c_prev))
        if attrs.input_forget:
            forget = 1 - i
        c = forget * c_prev + i * g(clip(x_c))
        if P is not None:
            o = f(clip(x_o + p_o * c))
        return o * h(c), c

    return step


def gru_cell(attrs: RNNAttributes, d: int, R: Tensor, Rb_h: Tensor | None) -> Cell:
    """ONNX GRU: gates z, r, h; ``Rb_h`` is the recurrent bias of the h gate, which the input
    projection excludes when ``linear_before_reset`` is 1."""
    f, g = (_activation(a) for a in attrs.activations[d])
    clip = _clip(attrs)
    H = R.shape[1]
    R_t = R.t()  # [H, 3H]: z, r, h
    R_zr, R_h = R_t[:, : 2 * H], R_t[:, 2 * H :]

    def step(xw: Tensor, state: State) -> State:
        (h_prev,) = state
        x_zr, x_h = xw[:, : 2 * H], xw[:, 2 * H :]
        if attrs.linear_before_reset:
            recurrent = h_prev @ R_t
            z, r = f(clip(x_zr + recurrent[:, : 2 * H])).chunk(2, dim=-1)
            h_h = recurrent[:, 2 * H :] if Rb_h is None else recurrent[:, 2 * H :] + Rb_h
            candidate = g(clip(x_h + r * h_h))
        else:
            z, r = f(clip(torch.addmm(x_zr, h_prev, R_zr))).chunk(2, dim=-1)
            candidate = g(clip(torch.addmm(x_h, r * h_prev, R_h)))
        return ((1 - z) * candidate + z * h_prev,)

    return step


def rnn_cell(attrs: RNNAttributes, d: int, R: Tensor) -> Cell:
    """ONNX RNN: h = f(x·Wᵀ + h·Rᵀ + Wb + Rb)."""
    (f,) = (_activation(a) for a in attrs.activations[d])
    clip = _clip(attrs)
    R_t = R.t()

    def step(xw: Tensor, state: State) -> State:
        return (f(clip(torch.addmm(xw, state[0], R_t))),)

    return step


def masked_recurrence(
    cell: Cell, xw: Tensor, initial_state: State, mask: Tensor | None, reverse: bool, masked_output: str
) -> tuple[Tensor, State]:
    """Run one direction: ``xw`` ``[T, N, G*H]`` input projections, ``mask`` ``[T, N]`` or ``None``
    (all true). At a masked step the state is untouched and ``Y`` holds zeros ("zero") or the
    previous ``Y`` ("carry", zeros before the first unmasked step). Returns time-aligned ``Y``
    ``[T, N, H]`` and the final state (``initial_state`` when ``T`` is 0)."""
    T = xw.shape[0]
    state = initial_state
    carried = torch.zeros_like(initial_state[0])
    ys: list[Tensor] = [carried] * T
    for t in reversed(range(T)) if reverse else range(T):
        new_state = cell(xw[t], state)
        if mask is None:
            state, ys[t] = new_state, new_state[0]
            continue
        m = mask[t].unsqueeze(-1)
        state = tuple(torch.where(m, new, old) for new, old in zip(new_state, state))
        ys[t] = torch.where(m, new_state[0], carried)
        if masked_output == "carry":
            carried = ys[t]
    Y = torch.stack(ys) if T else carried.new_zeros((0, *carried.shape))  # T == 0: empty Y
    return Y, state


def run(
    attrs: RNNAttributes,
    X: Tensor,
    W: Tensor,
    R: Tensor,
    B: Tensor | None,
    initial_h: Tensor | None,
    initial_c: Tensor | None,
    P: Tensor | None,
    mask: Tensor | None,
) -> tuple[Tensor, ...]:
    """Every direction of ``attrs.op_type`` on inputs already validated (ONNX shapes and layout).
    Returns ``(Y, Y_h)`` and, for LSTM, ``Y_c``, as the ONNX op does."""
    batch_major = attrs.layout == 1
    if batch_major:
        X = X.transpose(0, 1)
        mask = None if mask is None else mask.t()
        initial_h = None if initial_h is None else initial_h.transpose(0, 1)
        initial_c = None if initial_c is None else initial_c.transpose(0, 1)
    T, N, _ = X.shape
    D, H = attrs.num_directions, R.shape[-1]
    if mask is not None:
        # A masked step's input reaches no output; zeroing it also keeps a NaN or Inf there out of
        # the gradients (0 * NaN would otherwise leak through torch.where's backward).
        X = torch.where(mask.unsqueeze(-1), X, torch.zeros((), dtype=X.dtype, device=X.device))
    zeros = X.new_zeros(D, N, H)
    initial_h = zeros if initial_h is None else initial_h
    initial_c = zeros if initial_c is None else initial_c
    ys, finals = [], []
    for d in range(D):
        Wb, Rb = (None, None) if B is None else B[d].chunk(2)
        if attrs.op_type == "MaskedLSTM":
            cell = lstm_cell(attrs, d, R[d], None if P is None else P[d])
            state: State = (initial_h[d], initial_c[d])
        elif attrs.op_type == "MaskedGRU":
            Rb_h = None if Rb is None else Rb[2 * H :]
            if Rb is not None and attrs.linear_before_reset:
                Rb = torch.cat([Rb[: 2 * H], torch.zeros_like(Rb_h)])  # Rb_h acts inside the cell
            cell = gru_cell(attrs, d, R[d], Rb_h)
            state = (initial_h[d],)
        else:
            cell = rnn_cell(attrs, d, R[d])
            state = (initial_h[d],)
        xw = X @ W[d].t() if B is None else X @ W[d].t() + (Wb + Rb)
        reverse = attrs.direction == "reverse" or d == 1
        y, final = masked_recurrence(cell, xw, state, mask, reverse, attrs.masked_output)
        ys.append(y)
        finals.append(final)
    Y = torch.stack(ys, dim=1)  # [T, D, N, H]
    states = [torch.stack(s) for s in zip(*finals)]  # each [D, N, H]
    if batch_major:
        Y = Y.permute(2, 0, 1, 3)
        states = [s.transpose(0, 1) for s in states]
    return (Y, *states)
