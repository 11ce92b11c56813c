"""``onnx_masked_rnn.torch.export`` of models that keep their packed-sequence code (issue 19, item 2).

Each model is written as real models are (the PyTorch chatbot tutorial's ``EncoderRNN``; a
batch-first LSTM with ``enforce_sorted=False``; ``total_length``), its recurrent module swapped with
``from_module`` and nothing else changed; it is exported with dynamic batch and time and run in
onnxruntime at another batch size and length than the traced ones against the original model (torch's
module on real packed sequences): values, and the output's length (the longest row, or
``total_length``). Forms that cannot be traced fail with an error naming the one-line change.
"""

from __future__ import annotations

import copy

import packed_helpers
import pytest
import toolkit
import torch
from oracles import assert_close
from torch import nn
from torch.nn.utils import rnn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from onnx_masked_rnn.torch import MaskedGRU, MaskedLSTM, export
from onnx_masked_rnn.torch.packed import PackedSequenceError

ORIGINALS = (rnn.pack_padded_sequence, rnn.pad_packed_sequence)
VOCAB, HIDDEN = 20, 6


class EncoderRNN(nn.Module):
    """The chatbot tutorial's encoder, as written there: ``nn.utils.rnn.`` attribute calls,
    time-major, lengths sorted (``enforce_sorted`` default), the two directions summed."""

    def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
        super().__init__()
        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.embedding = embedding
        self.gru = nn.GRU(
            hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout), bidirectional=True
        )

    def forward(self, input_seq, input_lengths, hidden=None):
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
        outputs, hidden = self.gru(packed, hidden)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        outputs = outputs[:, :, : self.hidden_size] + outputs[:, :, self.hidden_size :]
        return outputs, hidden


class SortingTagger(nn.Module):
    """Batch-first LSTM on unsorted lengths (``enforce_sorted=False``), the functions imported by
    name into this module's globals; returns the padded output, the lengths and both states."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.lstm = nn.LSTM(HIDDEN, HIDDEN, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * HIDDEN, 3)

    def forward(self, ids, lengths):
        packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        output, (h, c) = self.lstm(packed)
        padded, out_lengths = pad_packed_sequence(output, batch_first=True, padding_value=0.5)
        return self.head(padded), out_lengths, h, c


TOTAL = 9


class FixedLength(nn.Module):
    """``total_length`` both ways: the input's own length, and a constant (by a helper module that
    binds ``pad_packed_sequence`` by name); a batch-first pack read time-major."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, HIDDEN)

    def forward(self, x, lengths):
        packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        output, h = self.gru(packed)
        same, _ = rnn.pad_packed_sequence(output, batch_first=True, total_length=x.shape[1])
        return same, packed_helpers.pad_to(output, TOTAL), h


def _ids(N: int, T: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(1, VOCAB, (N, T), generator=generator)


def _leaves(outputs) -> list[torch.Tensor]:
    """The tensors of nested output tuples, in order (the ONNX model's outputs)."""
    return [outputs] if isinstance(outputs, torch.Tensor) else [t for o in outputs for t in _leaves(o)]


def _restored(model: nn.Module) -> bool:
    """The functions and the modules' ``forward`` are torch's again after ``export``."""
    bound = (pack_padded_sequence, pad_packed_sequence, packed_helpers.pad_packed_sequence)
    functions = (rnn.pack_padded_sequence, rnn.pad_packed_sequence, *bound)
    return functions == (*ORIGINALS, *ORIGINALS, ORIGINALS[1]) and not any(
        "forward" in m.__dict__ for m in model.modules()
    )


# Each case: (original model, its swap, traced inputs, runs at other batch sizes and lengths, the
# inputs' time axis, dynamic shapes).
def _chatbot():
    torch.manual_seed(0)
    model = EncoderRNN(HIDDEN, nn.Embedding(VOCAB, HIDDEN), n_layers=2, dropout=0.1)
    g = torch.Generator().manual_seed(1)
    traced = (_ids(3, 7, g).t(), torch.tensor([7, 5, 2]))
    runs = [(_ids(4, 11, g).t().contiguous(), torch.tensor([8, 8, 3, 1]))]
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"input_seq": {0: time, 1: batch}, "input_lengths": {0: batch}}
    return model, lambda m: setattr(m, "gru", MaskedGRU.from_module(m.gru)), traced, runs, 0, dynamic


def _tagger():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    traced = (_ids(3, 6, g), torch.tensor([2, 6, 4]))
    runs = [(_ids(5, 10, g), torch.tensor([3, 7, 1, 7, 5]))]
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"ids": {0: batch, 1: time}, "lengths": {0: batch}}
    return (
        SortingTagger(),
        lambda m: setattr(m, "lstm", MaskedLSTM.from_module(m.lstm)),
        traced,
        runs,
        1,
        dynamic,
    )


def _fixed():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    traced = (torch.randn(3, 5, 3, generator=g), torch.tensor([5, 2, 4]))
    # Longer and shorter than TOTAL: the constant total_length pads one and cuts the other.
    runs = [
        (torch.randn(4, 12, 3, generator=g), torch.tensor([6, 9, 2, 5])),
        (torch.randn(2, 7, 3, generator=g), torch.tensor([3, 6])),
    ]
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"x": {0: batch, 1: time}, "lengths": {0: batch}}
    return FixedLength(), lambda m: setattr(m, "gru", MaskedGRU.from_module(m.gru)), traced, runs, 1, dynamic


@pytest.mark.parametrize(
    "case", [_chatbot, _tagger, _fixed], ids=["chatbot-gru", "sorting-lstm", "total-length"]
)
def test_unchanged_packed_model_exports(case) -> None:
    original, swap, traced, runs, time_axis, dynamic = case()
    original.eval()
    model = copy.deepcopy(original)
    swap(model)
    exported = export(model, traced, dynamic_shapes=dynamic)
    assert _restored(model)
    session = toolkit.session(exported)
    names = [i.name for i in session.get_inputs()]
    for run in runs:
        # A longest row shorter than the padded input: the output's length is max(lengths) (or
        # total_length), as torch's, not the input's.
        assert int(run[1].max()) < run[0].shape[time_axis] != traced[0].shape[time_axis]
        with torch.no_grad():
            expected = [t.numpy() for t in _leaves(original(*run))]
        actual = session.run(None, {n: t.numpy() for n, t in zip(names, run)})
        assert [a.shape for a in actual] == [e.shape for e in expected]
        assert_close(
            f"packed {case.__name__} in onnxruntime vs torch", actual, expected, rtol=1e-5, atol=1e-5
        )


class ReadsData(EncoderRNN):
    """Reads ``packed.data`` (dropout on the packed data, as some models do): not traceable."""

    def forward(self, input_seq, input_lengths, hidden=None):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(input_seq), input_lengths)
        packed = nn.utils.rnn.PackedSequence(
            nn.functional.dropout(packed.data, 0.1, self.training), packed.batch_sizes
        )
        return nn.utils.rnn.pad_packed_sequence(self.gru(packed, hidden)[0])[0]


class StoresFunction(EncoderRNN):
    """Keeps ``pack_padded_sequence`` in an attribute: the real function runs, and its
    PackedSequence reaches the GRU."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pack = nn.utils.rnn.pack_padded_sequence

    def forward(self, input_seq, input_lengths, hidden=None):
        packed = self.pack(self.embedding(input_seq), input_lengths)
        return nn.utils.rnn.pad_packed_sequence(self.gru(packed, hidden)[0])[0]


@pytest.mark.parametrize(
    "model_class,swapped,expected",
    [
        (EncoderRNN, False, r"model\.gru is a GRU.*model\.gru = MaskedGRU\.from_module\(model\.gru\)"),
        (
            ReadsData,
            True,
            r"no 'data'.*mask = torch\.arange\(x\.shape\[1\]\)\[None, :\] < lengths\[:, None\]",
        ),
        (
            StoresFunction,
            True,
            r"model\.gru got a PackedSequence.*kept in an attribute.*mask = torch\.arange",
        ),
    ],
    ids=["rnn-not-swapped", "reads-data", "stored-function"],
)
def test_untraceable_packed_form_names_the_change(model_class, swapped, expected) -> None:
    model = model_class(HIDDEN, nn.Embedding(VOCAB, HIDDEN)).eval()
    if swapped:
        model.gru = MaskedGRU.from_module(model.gru)
    g = torch.Generator().manual_seed(4)
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"input_seq": {0: time, 1: batch}, "input_lengths": {0: batch}}
    with pytest.raises(PackedSequenceError, match=expected):
        export(model, (_ids(3, 6, g).t(), torch.tensor([6, 4, 2])), dynamic_shapes=dynamic)
    assert _restored(model)


class Unpacks(EncoderRNN):
    """Unpacks into one tensor per row (``unpack_sequence``), a loop over the batch."""

    def forward(self, input_seq, input_lengths, hidden=None):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(input_seq), input_lengths)
        return torch.cat(nn.utils.rnn.unpack_sequence(self.gru(packed, hidden)[0]))


def test_a_dynamic_axis_the_model_fixes_is_an_error() -> None:
    """torch.onnx.export retries a model that specialises a named Dim with the axis fixed, silently
    (here unpack_sequence's loop over the rows fixes the batch at 3): export refuses it."""
    model = Unpacks(HIDDEN, nn.Embedding(VOCAB, HIDDEN)).eval()
    model.gru = MaskedGRU.from_module(model.gru)
    g = torch.Generator().manual_seed(5)
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"input_seq": {0: time, 1: batch}, "input_lengths": {0: batch}}
    with pytest.raises(
        ValueError, match=r"input 'input_seq' axis 1 .* 'batch', but the exported model fixes it at 3"
    ):
        export(model, (_ids(3, 6, g).t(), torch.tensor([6, 4, 2])), dynamic_shapes=dynamic)
    assert _restored(model)
