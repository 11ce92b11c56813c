from onnx_masked_rnn.cli import main

raise SystemExit(main())
