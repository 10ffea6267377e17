"""modstream/jobs/worker.py, the process a batched operator's Python runs in with
`modstream.python.worker-process: true`: the frames EmbeddedPython.Worker (deploy/flink-ext)
writes and reads, a failing call answered with its traceback, prints kept off the frames, the
end of input ending it. The Java side is
exercised with the job in tests/integration/test_python_workers.py."""

from __future__ import annotations

import gc
import io
import struct
import subprocess
import sys

from modstream.core.config import PROJECT_ROOT
from modstream.jobs import collector, worker


class Echo:
    """A handler as the operators make theirs: (pickled config, subtask)."""

    def __init__(self, config: bytes, subtask: int) -> None:
        self.prefix = config + b"/" + str(subtask).encode()

    def echo(self, payload: bytes) -> bytes:
        print("a handler's print goes to stderr")  # never into the frames
        return self.prefix + b":" + payload

    def boom(self, payload: bytes) -> bytes:
        raise ValueError(f"refused {payload!r}")

    def collector(self, _payload: bytes) -> bytes:
        """The interpreter's collector as the handler sees it: thresholds, frozen objects."""
        return repr((gc.get_threshold(), gc.get_freeze_count() > 0)).encode()


def frames(*parts: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(part)) + part for part in parts)


def answers(data: bytes) -> list[tuple[int, bytes]]:
    found = []
    while data:
        status, length = struct.unpack(">Bi", data[:5])
        found.append((status, data[5 : 5 + length]))
        data = data[5 + length :]
    return found


START = (b"tests.jobs.test_worker", b"Echo", b"cfg", b"3")


def test_the_worker_answers_each_call_and_a_failing_one_with_its_traceback() -> None:
    source = io.BytesIO(frames(*START, b"echo", b"one", b"boom", b"x", b"echo", b"two"))
    sink = io.BytesIO()
    assert worker.serve(source, sink) == 0  # the input ended: done
    got = answers(sink.getvalue())
    assert got[0] == (0, b"")  # made
    assert got[1] == (0, b"cfg/3:one")
    assert got[2][0] == 1 and b"ValueError: refused b'x'" in got[2][1]
    assert got[3] == (0, b"cfg/3:two")  # a failed call leaves the handler serving


def test_a_handler_that_cannot_be_made_is_answered_with_why() -> None:
    sink = io.BytesIO()
    assert (
        worker.serve(io.BytesIO(frames(b"tests.jobs.test_worker", b"Nope", b"", b"0")), sink) == 1
    )
    ((status, text),) = answers(sink.getvalue())
    assert status == 1 and b"AttributeError" in text


def test_a_frame_cut_short_is_an_error_not_a_call() -> None:
    cut = frames(*START, b"echo") + struct.pack(">i", 10) + b"abc"
    try:
        worker.serve(io.BytesIO(cut), io.BytesIO())
    except EOFError as error:
        assert "10 bytes ended after 3" in str(error)
    else:
        raise AssertionError("a cut frame was served")


def run_worker(data: bytes) -> subprocess.CompletedProcess[bytes]:
    """`python -m modstream.jobs.worker` fed `data` on its standard input, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "modstream.jobs.worker"],
        input=data,
        capture_output=True,
        cwd=PROJECT_ROOT,
        timeout=60,
        check=False,
    )


def test_the_process_keeps_its_output_for_frames_and_prints_to_stderr() -> None:
    done = run_worker(frames(*START, b"echo", b"p"))
    assert done.returncode == 0
    assert answers(done.stdout) == [(0, b""), (0, b"cfg/3:p")]
    assert b"a handler's print goes to stderr" in done.stderr


def test_the_process_settles_its_collector_once_the_handler_is_made() -> None:
    """The worker process runs its collector as the embedded interpreter does
    (modstream/jobs/collector.py): what the handler's making left frozen, the thresholds set."""
    done = run_worker(frames(*START, b"collector", b""))
    assert done.returncode == 0, done.stderr
    assert answers(done.stdout) == [(0, b""), (0, repr((collector.THRESHOLDS, True)).encode())]
    assert gc.get_threshold() != collector.THRESHOLDS  # this process: Python's defaults
