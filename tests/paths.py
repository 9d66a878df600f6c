"""Where things are, for tests at any depth of tests/: the repository root, tests/
itself (its helper scripts run as processes) and the data the tests ship."""

import os

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS_DIR)
TESTDATA = os.path.join(TESTS_DIR, "testdata")
