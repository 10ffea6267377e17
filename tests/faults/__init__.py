"""The fault-injection harness (issue 13): `make test-faults`, `python -m tests.faults.harness`."""
