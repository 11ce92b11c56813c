"""A backend module that never finishes importing (a runtime stuck loading a driver), for the
conformance runner's tests: importing it blocks for an hour."""

import time

time.sleep(3600)
