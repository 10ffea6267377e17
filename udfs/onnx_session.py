"""ONNX Runtime sessions: CUDA when available (onnxruntime-gpu), else CPU, logged once."""

from __future__ import annotations

import logging
import os
from typing import Any

import onnxruntime as ort

LOG = logging.getLogger("modstream.udfs")
_announced: set[str] = set()


def providers() -> list[str]:
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available and os.environ.get("MODSTREAM_ONNX_CPU") != "1":
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def session(path: Any, *, intra_op_threads: int | None = None) -> ort.InferenceSession:
    """One session for `path` with threads set for this machine (all cores by default, or
    MODSTREAM_ONNX_THREADS) and the best provider; which one is logged once per model."""
    options = ort.SessionOptions()
    threads = intra_op_threads or int(os.environ.get("MODSTREAM_ONNX_THREADS") or 0)
    options.intra_op_num_threads = threads or (os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    created = ort.InferenceSession(str(path), options, providers=providers())
    name = os.path.basename(str(path))
    if name not in _announced:
        _announced.add(name)
        LOG.warning(
            "onnx: %s on %s (%d threads)",
            name,
            created.get_providers()[0],
            options.intra_op_num_threads,
        )
    return created
