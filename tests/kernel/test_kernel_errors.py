"""The run-time errors the specification lists (a mask of the wrong shape, ``sequence_lens`` out of
range) come back from the kernel as onnxruntime errors naming the op and the input, never a crash
(each run is in a child process), and leave the session usable; one session run from several
threads at once gives what the same runs give one at a time."""

from __future__ import annotations

import kernel_cases
import pytest
from kernel_cases import job

from onnx_masked_rnn._worker import Crash, Worker


@pytest.fixture(scope="module")
def worker():
    slot = Worker(kernel_cases.setup, None, 120.0, name="the kernel's process")
    yield slot
    slot.close()


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layout", [0, 1])
def test_bad_mask_and_sequence_lens_are_errors_naming_the_input(worker, op, layout):
    one = job(op, present=("B", "mask"), sequence_lens="random", attributes={"layout": layout})
    found = worker.run(("run_errors", one))
    assert not isinstance(found, Crash), found
    assert found.pop("after") == "", "the session no longer gives the reference's result after an error"
    for label, (name, _) in kernel_cases.bad_inputs(one).items():
        message = found[label]
        assert message.startswith("InvalidArgument: "), f"{label}: {message}"
        assert f"Masked{op}: input '{name}'" in message, f"{label}: {message}"


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_the_results_do_not_depend_on_the_intra_op_thread_count(worker, op):
    # 70 rows: five ranges of rows (16, the last 6) each through every step; linear_before_reset
    # off for GRU (its two products), bidirectional, holes and sequence_lens
    one = job(
        op,
        shape=(6, 70, 8, 32),
        attributes={"direction": "bidirectional"},
        sequence_lens="random",
    )
    outcome = worker.run(("thread_counts_agree", one))
    assert outcome is None, outcome


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_one_rows_results_do_not_depend_on_the_intra_op_thread_count(worker, op):
    # batch 1, hidden_size 370: the matrix-vector products are split over the threads in ranges
    # of rows of R (2 to 8 of them, the last one short), whose length is no multiple of a vector
    one = job(op, shape=(4, 1, 8, 370), attributes={"direction": "bidirectional"})
    outcome = worker.run(("thread_counts_agree", one))
    assert outcome is None, outcome


@pytest.mark.parametrize("intra_op_threads", [1, 2])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_one_session_from_several_threads_gives_the_results_of_one_at_a_time(worker, op, intra_op_threads):
    one = job(
        op,
        shape=(40, 16, 24, 32),
        attributes={"direction": "bidirectional", "masked_output": "carry"},
        sequence_lens="with_zero",
    )
    outcome = worker.run(("concurrent_runs", one, 6, 20, intra_op_threads))
    assert outcome is None, outcome
