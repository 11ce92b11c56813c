"""Print a digest of every model ``onnx-masked-rnn bench --ops LSTM`` times through ``inline``
(each shape and mask; native expansion, Scan body in the capture and portable forms).

Run it in two checkouts: equal digests mean the two releases hand onnxruntime the same graphs, so
their ratios in the speed table cannot differ (no timing needed). Run:
``python scripts/graph_digests.py`` (with the checkout's package importable, e.g. ``PYTHONPATH=.``).
"""

from __future__ import annotations

import hashlib
import itertools

from onnx_masked_rnn import bench, testing
from onnx_masked_rnn.inline import inline

SHAPES = [(100, 32, 64, 128), (1000, 1, 64, 256), (50, 256, 64, 128)]
MASKS = ["all_true", "right_padded", "holes"]
FORMS = [("native", "capture"), ("scan", "capture"), ("scan", "portable")]


def main() -> None:
    for shape, mask in itertools.product(SHAPES, MASKS):
        attrs, inputs = bench.workload(bench.Case("LSTM", shape, mask, 1))
        model = testing.make_model(attrs, inputs, bench.OPSET)
        for strategy, form in FORMS:
            digest = hashlib.sha256(inline(model, strategy, scan_form=form).SerializeToString()).hexdigest()
            print(shape, mask, strategy, form, digest[:16])


if __name__ == "__main__":
    main()
