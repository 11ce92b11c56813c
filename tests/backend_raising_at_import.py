"""A backend module whose import fails with an error that is not an ImportError (a runtime that
cannot initialise), for the conformance runner's tests."""

raise RuntimeError("the runtime found no device to initialise\nsecond line of a long message")
