"""Detectors on ONNX Runtime and their batching (issue 6)."""
