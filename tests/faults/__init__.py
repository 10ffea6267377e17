"""The fault-injection harness (issue 13): modstream/testing/faults/, `make test-faults`."""
