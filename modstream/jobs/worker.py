"""A batched operator's Python in a process of its own (deploy/flink-ext EmbeddedPython.Worker):
`python -m modstream.jobs.worker MODULE.CLASS#SUBTASK` (the argument names the handler for `ps`;
the handler comes in the frames), started by the operator with the job's Python, `sys.path` and
working directory when the job sets `modstream.python.worker-process: true`.

Frames of a 4-byte big-endian length and bytes. In: the handler's module, class, pickled config
and subtask, then per call the method's name and its payload. Out, per frame pair: a status byte
(0: the answer follows; 1: the traceback follows) and the bytes. The handler is the class the
embedded interpreter would run (`BatchedModerate`, `BatchedDecode`, ...), called the same way.
Standard output carries the frames only: whatever the handler prints goes to standard error
(the TaskManager's). The process returns at the end of its input (the operator closed).
"""

from __future__ import annotations

import importlib
import os
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from modstream.jobs import collector

_LENGTH = struct.Struct(">i")
_STATUS = struct.Struct(">Bi")


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's bytes; None at the end of input."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    if len(body) < length:
        raise EOFError(f"a frame of {length} bytes ended after {len(body)}")
    return body


def write_answer(stream: BinaryIO, status: int, body: bytes) -> None:
    stream.write(_STATUS.pack(status, len(body)))
    stream.write(body)
    stream.flush()


def serve(source: BinaryIO, sink: BinaryIO, made_hook: Callable[[], None] = lambda: None) -> int:
    """Make the handler (then call `made_hook`), then answer calls until the input ends; the
    exit status."""
    head = [read_frame(source) for _ in range(4)]
    if any(part is None for part in head):
        return 0  # closed before it started
    module, cls, config, subtask = head
    assert module is not None and cls is not None and subtask is not None
    try:
        made = getattr(importlib.import_module(module.decode()), cls.decode())
        handler: Any = made(config, int(subtask))
    except Exception:
        write_answer(sink, 1, traceback.format_exc().encode())
        return 1
    made_hook()
    write_answer(sink, 0, b"")
    while True:
        method = read_frame(source)
        if method is None:
            return 0
        payload = read_frame(source)
        if payload is None:
            return 0
        try:
            answer = bytes(getattr(handler, method.decode())(payload))
        except Exception:
            write_answer(sink, 1, traceback.format_exc().encode())
            continue
        write_answer(sink, 0, answer)


def main() -> int:
    # The frames' own copy of standard output; fd 1 (print, a library's logging) goes to
    # standard error from here on.
    sink = os.fdopen(os.dup(1), "wb", buffering=1 << 16)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    source = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    return serve(source, sink, collector.settle)  # as the embedded interpreter does


if __name__ == "__main__":
    raise SystemExit(main())
