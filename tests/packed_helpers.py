"""A helper module that a model of tests/torch/test_packed_export.py calls: it binds
``pad_packed_sequence`` by name, as library code does."""

import torch
from torch.nn.utils.rnn import pad_packed_sequence


def pad_to(packed: object, total_length: int) -> torch.Tensor:
    """The padded time-major output of ``packed``, ``total_length`` steps long."""
    return pad_packed_sequence(packed, padding_value=-1.0, total_length=total_length)[0]
