"""Latency in onnxruntime of ``onnx_masked_rnn.torch.export`` (each strategy) against the
TorchScript export (``torch.onnx.export(..., dynamo=False)``) of ``nn.LSTM`` on a packed sequence,
on the same right-padded batch, side by side in one process.

Both models hold the same weights and compute the same thing (checked before timing): the TorchScript
exporter turns the packed sequence into ONNX LSTM's ``sequence_lens``. Runs are interleaved
(one run of each model per round) after warm-up; the median of each is printed with its ratio to the
TorchScript export. Then, in eager PyTorch on the same batch and thread count, one training step
(forward and backward) of ``MaskedLSTM`` against ``nn.LSTM`` on the packed sequence.
Run: ``python scripts/bench_torch.py [--threads 1] [--rounds 30]``.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import onnx_masked_rnn.torch as omt
from onnx_masked_rnn import record


class Packed(torch.nn.Module):
    """What a PyTorch user exports today: nn.LSTM on a packed sequence."""

    def __init__(self, lstm: torch.nn.LSTM, total_length: int) -> None:
        super().__init__()
        self.lstm, self.total_length = lstm, total_length

    def forward(self, x: torch.Tensor, lengths: torch.Tensor):
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        output, (h, c) = self.lstm(packed)
        output, _ = pad_packed_sequence(output, total_length=self.total_length)
        return output, h, c


class Masked(torch.nn.Module):
    def __init__(self, lstm: torch.nn.LSTM) -> None:
        super().__init__()
        self.lstm = omt.MaskedLSTM.from_module(lstm)

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        output, (h, c) = self.lstm(x, mask=mask)
        return output, h, c


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape", type=int, nargs=4, default=[100, 32, 64, 128], metavar=("T", "N", "I", "H")
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write a record (onnx_masked_rnn.record), e.g. docs/results/torch_export.json",
    )
    args = parser.parse_args()
    recorded = record.start("torch-export", ["torch"])
    T, N, I, H = args.shape

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    lstm = torch.nn.LSTM(I, H).eval()
    x = torch.from_numpy(rng.standard_normal((T, N, I), dtype=np.float32))
    lengths = torch.from_numpy(rng.integers(1, T + 1, N))
    lengths[0] = T
    mask = torch.arange(T)[:, None] < lengths[None, :]  # [T, N], right-padded

    buffer = io.BytesIO()
    torch.onnx.export(
        Packed(lstm, T).eval(),
        (x, lengths),
        buffer,
        dynamo=False,
        input_names=["x", "lengths"],
        output_names=["output", "h", "c"],
    )
    models = {
        "TorchScript export, packed nn.LSTM": (
            onnx.load_from_string(buffer.getvalue()),
            {"x": x, "lengths": lengths},
        )
    }
    batch, steps = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"x": {0: steps, 1: batch}, "mask": {0: steps, 1: batch}}
    masked = Masked(lstm).eval()
    for strategy in omt.STRATEGIES:
        exported = omt.export(masked, (x, mask), dynamic_shapes=dynamic, strategy=strategy)
        models[f"onnx_masked_rnn.torch.export, {strategy}"] = (exported, {"x": x, "mask": mask})

    sessions, errors = {}, {}
    with torch.no_grad():
        expected = [t.numpy() for t in masked(x, mask)]
    for name, (model, inputs) in models.items():
        session = _session(model, args.threads)
        feeds = {i.name: inputs[i.name].numpy() for i in session.get_inputs()}
        outputs = session.run(None, feeds)
        worst = max(float(np.abs(a - e).max()) for a, e in zip(outputs, expected))
        print(f"{name:<45} max |difference| to eager MaskedLSTM: {worst:.2g}")
        sessions[name] = (session, feeds)
        errors[name] = worst

    times: dict[str, list[float]] = {name: [] for name in sessions}
    for session, feeds in sessions.values():
        for _ in range(5):
            session.run(None, feeds)
    for _ in range(args.rounds):
        for name, (session, feeds) in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[name].append(time.perf_counter() - start)
    baseline = statistics.median(times[next(iter(times))])
    print(
        f"\nT={T} N={N} I={I} H={H}, right-padded, float32, {args.threads} thread(s), median of {args.rounds}"
    )
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}")
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<45} {median * 1e3:8.2f} ms  {median / baseline:5.2f}x")
        rows.append(
            {
                "model": name,
                "median_ms": median * 1e3,
                "ratio": median / baseline,
                "max_abs_diff": errors[name],
            }
        )
    training = _bench_training(lstm, masked.lstm, x, lengths, mask, args.threads, max(args.rounds // 3, 3))
    if args.json:
        fields = {"shape": args.shape, "threads": args.threads, "rounds": args.rounds}
        record.write(record.finish(recorded, **fields, rows=rows, training=training), args.json)
        print(f"wrote {args.json}")


def _bench_training(
    lstm: torch.nn.LSTM,
    masked: omt.MaskedLSTM,
    x: torch.Tensor,
    lengths: torch.Tensor,
    mask: torch.Tensor,
    threads: int,
    rounds: int,
) -> list[dict]:
    """One forward + backward in eager PyTorch, interleaved, median of ``rounds``: a row per model."""
    torch.set_num_threads(threads)
    lstm.train()
    masked.train()

    def packed_step() -> None:
        output, _ = lstm(pack_padded_sequence(x, lengths, enforce_sorted=False))
        output.data.sum().backward()

    def masked_step() -> None:
        output, _ = masked(x, mask=mask)
        output.sum().backward()

    steps = {"nn.LSTM on the packed sequence": packed_step, "MaskedLSTM with the mask": masked_step}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():
        step()
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    baseline = statistics.median(times[next(iter(times))])
    print(f"\neager training step (forward + backward), {threads} thread(s), median of {rounds}")
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<45} {median * 1e3:8.2f} ms  {median / baseline:5.2f}x")
        rows.append({"model": name, "median_ms": median * 1e3, "ratio": median / baseline})
    return rows


if __name__ == "__main__":
    main()
