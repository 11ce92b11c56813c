"""A PyTorch tagger on a masked LSTM: train it on a mask with holes, export it with dynamic batch
and time, run it in onnxruntime. Run: ``python examples/pytorch_masked_tagger.py``."""

import numpy as np
import onnxruntime as ort
import torch

from onnx_masked_rnn.torch import MaskedLSTM, export


class Tagger(torch.nn.Module):
    def __init__(self, vocab: int = 50, hidden: int = 32, tags: int = 5) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 16)
        self.lstm = MaskedLSTM(16, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, tags)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # mask [N, T] (batch_first): False at a step to skip, wherever it is (padding or a hole)
        output, _ = self.lstm(self.embed(ids), mask=mask)
        return self.head(output)


torch.manual_seed(0)
model = Tagger()
ids = torch.randint(1, 50, (8, 12))
mask = torch.rand(8, 12) > 0.2
tags = ids % 5
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(5):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(ids, mask)[mask], tags[mask])
    loss.backward()
    optimizer.step()

model.eval()
batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
onnx_model = export(  # pass a path as third argument to save it
    model,
    (ids, mask),
    dynamic_shapes={"ids": {0: batch, 1: time}, "mask": {0: batch, 1: time}},
    strategy="native",  # standard ops only, onnxruntime's LSTM kernel underneath
)
session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
ids, mask = torch.randint(1, 50, (3, 20)), torch.rand(3, 20) > 0.2  # another batch size and length
(logits,) = session.run(None, {"ids": ids.numpy(), "mask": mask.numpy()})
with torch.no_grad():
    expected = model(ids, mask).numpy()
np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
print("onnxruntime equals eager PyTorch; max |difference| =", float(np.abs(logits - expected).max()))
