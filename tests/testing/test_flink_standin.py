"""`modstream.testing.flink.JavaKeyed`, the Java side of the batched operators in plain Python
that the operators' tests and the in-process benchmark (modstream/bench/fire.py) share: what it
hands a handler, in which order, and which timers it fires, checked with a handler that only
records its calls and answers what it is told."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from modstream.jobs.moderation.batch import BATCH, TIMER
from modstream.jobs.moderation.config import ModerationConfig
from modstream.testing.flink import MAX_VERSIONS_PER_CALL, JavaKeyed


class Recorder:
    """A KeyedBatch's interface: each `fire` payload kept; answers the next `answers` entry
    (timer changes as [key, ts, register], and broadcast puts)."""

    payloads: ClassVar[list[list[Any]]] = []
    answers: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, _pickled_config: bytes, _subtask: int) -> None:
        Recorder.payloads = []

    def restore(self, _payload: bytes) -> bytes:
        return b""

    def fire(self, payload: bytes) -> bytes:
        Recorder.payloads.append(msgspec.msgpack.decode(payload))
        answer = Recorder.answers.pop(0) if Recorder.answers else {}
        return msgspec.msgpack.encode(
            [[], answer.get("timers", []), [], [], answer.get("puts", [])]
        )


def _row(key: str, ts: int, seq: int = 0, value: str = "v") -> tuple[Any, ...]:
    return ("keyed", key, "content.versions", value, ts, seq, "")


@pytest.fixture
def java() -> JavaKeyed:
    Recorder.answers = []
    return JavaKeyed(Recorder, ModerationConfig())


def test_keys_come_by_their_earliest_ready_ts_and_rows_by_ts_then_seq(java: JavaKeyed) -> None:
    java.element(_row("b", 20, value="b20"))
    java.element(_row("a", 30, seq=2, value="a30-2"))
    java.element(_row("a", 30, seq=1, value="a30-1"))
    java.element(_row("a", 10, value="a10"))
    java.element(_row("c", 99, value="c99"))
    assert java.watermark(5) == [] and Recorder.payloads == []  # nothing ready: no call
    java.watermark(30)
    [[watermark, stored, tasks]] = Recorder.payloads
    assert watermark == 30 and [key for key, _ in stored] == ["a", "b"]
    assert tasks == [
        [BATCH, "a", [["content.versions", value, ts, seq] for value, ts, seq in
                      (("a10", 10, 0), ("a30-1", 30, 1), ("a30-2", 30, 2))]],
        [BATCH, "b", [["content.versions", "b20", 20, 0]]],
    ]  # fmt: skip
    assert list(java.held) == ["c"]  # only what the watermark has not passed is held
    java.watermark(99)
    assert Recorder.payloads[-1][2] == [[BATCH, "c", [["content.versions", "c99", 99, 0]]]]
    assert java.held == {} and java.calls == 2


def test_timers_fire_once_by_ts_and_a_cleared_one_never(java: JavaKeyed) -> None:
    java.element(_row("a", 10))
    Recorder.answers = [
        {"timers": [["a", 50, True], ["b", 40, True], ["a", 45, True], ["a", 45, False]]}
    ]
    java.watermark(10)
    assert java.timers == {("a", 50), ("b", 40)}
    java.timer("a", 45)  # registered again after it was cleared: it fires once
    java.timer("a", 45)
    java.watermark(60)
    assert Recorder.payloads[-1][2] == [[TIMER, "b", 40], [TIMER, "a", 45], [TIMER, "a", 50]]
    assert java.timers == set()
    assert java.watermark(1_000) == [] and java.calls == 2


def test_a_timer_left_at_or_below_the_watermark_or_a_stray_put_is_refused(
    java: JavaKeyed,
) -> None:
    """Java fires a timer only at a later watermark, and a handler with no broadcast state
    has nothing to put in it: the stand-in says so where the real operator would go wrong."""
    java.element(_row("a", 10))
    Recorder.answers = [{"timers": [["a", 10, True]]}]
    with pytest.raises(AssertionError):
        java.watermark(10)
    java.element(_row("a", 20))
    Recorder.answers = [{"puts": [["policy", "x"]]}]
    with pytest.raises(AssertionError):
        java.watermark(20)


def test_more_versions_than_a_call_takes_are_split_each_version_whole() -> None:
    """As BatchedVersions.flush splits them: at most `max_versions` versions per call, keys in
    the order they were readied, and a version's input and its timers in the same call."""
    java = JavaKeyed(Recorder, ModerationConfig(), max_versions=2)
    Recorder.answers = [{"timers": [["a", 50, True], ["z", 40, True]]}]
    java.element(_row("a", 10))
    java.watermark(10)
    for key in ("b", "c", "a"):
        java.element(_row(key, 45))
    java.watermark(60)
    first, second = (payload[2] for payload in Recorder.payloads[1:])
    assert [task[:2] for task in first] == [[BATCH, "b"], [BATCH, "c"]]
    assert [task[:2] for task in second] == [[BATCH, "a"], [TIMER, "z"], [TIMER, "a"]]
    assert java.calls == 3


def test_the_split_is_javas() -> None:
    """The stand-in splits where BatchedVersions.java does."""
    java = (
        Path(__file__).resolve().parents[2]
        / "deploy/flink-ext/src/io/modstream/flink/BatchedVersions.java"
    ).read_text()
    [size] = re.findall(r"static final int MAX_VERSIONS_PER_CALL = (\d+);", java)
    assert int(size) == MAX_VERSIONS_PER_CALL
