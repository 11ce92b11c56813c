"""The operators' custom domain (kept apart so every module can import it without cycles)."""

DOMAIN = "io.onnx_masked_rnn"
OPSET_VERSION = 1
