"""ONNX Runtime sessions: CUDA when available (onnxruntime-gpu), else CPU, logged once."""

from __future__ import annotations

import logging
import os
from typing import Any

import onnxruntime as ort

LOG = logging.getLogger("modstream.udfs")
_announced: set[str] = set()


def providers() -> list[str]:
    """CUDA first when the package has it and a GPU is there (onnxruntime-gpu lists CUDA even
    on machines without one, and then warns at every session), else CPU."""
    available = ort.get_available_providers()
    gpu = os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")
    if "CUDAExecutionProvider" in available and gpu and os.environ.get("MODSTREAM_ONNX_CPU") != "1":
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def session(path: Any, *, intra_op_threads: int | None = None) -> ort.InferenceSession:
    """One session for `path` with threads set for this machine and the best provider; which
    one is logged once per model. Intra-op threads: `intra_op_threads`, else
    MODSTREAM_ONNX_THREADS, else half the cores. The scan job asks for 1 and calls the session
    from several threads at once (docs/scanning.md)."""
    options = ort.SessionOptions()
    threads = intra_op_threads or int(os.environ.get("MODSTREAM_ONNX_THREADS") or 0)
    options.intra_op_num_threads = threads or max(1, (os.cpu_count() or 2) // 2)
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
