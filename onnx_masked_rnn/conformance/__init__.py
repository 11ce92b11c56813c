"""The conformance suite: node tests for MaskedLSTM/GRU/RNN in ONNX's backend-test layout.

Case files (``masked_lstm.py``, ``masked_gru.py``, ``masked_rnn.py``) hold ``export_*`` functions in
the style of ``onnx/backend/test/case/node/lstm.py``; each computes its expected outputs with the
numpy reference and calls :func:`expect`. :func:`generate.generate` writes every case in three
variants under ``DIR/node/``:

- ``test_<case>``: the masked node, with the model-local functions it needs (``attach_functions``);
- ``test_<case>_expanded``: the specification's Scan + Where body inlined (``inline(model, "scan")``);
- ``test_<case>_expanded_native``: the expansion onto the native kernels (``inline(model, "native")``).

Every Scan body is in the portable form (``scan_form="portable"``: typed body inputs and outputs,
no outer-scope reads), so that any runtime can run the suite.

Each case folder holds ``model.onnx``, ``test_data_set_0/{input,output}_<i>.pb`` and ``data.json``
with the case's ``rtol``/``atol`` (the file and keys onnx's on-disk test loader reads) and its
description. The generated suite ships in the package under :data:`DATA_DIR`; ``runner`` runs it.
"""

from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"

__all__ = ["DATA_DIR"]
