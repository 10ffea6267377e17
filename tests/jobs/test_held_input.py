"""HeldInput (deploy/flink-ext), the input BatchedVersions holds in memory until the watermark
passes it, driven through the JVM gateway: what leaves at a watermark and in which order, what
stays, and a checkpoint's key groups restored on the subtasks that own them."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.java_gateway import get_field
from py4j.protocol import Py4JJavaError

pytestmark = pytest.mark.integration  # needs a JVM (the gateway), not the stack

MAX_PARALLELISM = 128


def held(jvm: Any, records: list[tuple[str, str, str, int, int]]) -> Any:
    """A HeldInput holding `records` (key, topic, value, ts, seq) in that arrival order."""
    flink = jvm.io.modstream.flink
    memory = flink.HeldInput()
    for key, topic, value, ts, seq in records:
        memory.add(key, flink.HeldInput.Record(topic, value, ts, seq))
    return memory


def taken(jvm: Any, memory: Any, key: str, watermark: int) -> list[tuple[str, int, int]]:
    """(value, ts, seq) of what `take` hands on, in the operator's order."""
    records = sorted_by_operator(jvm, memory.take(key, watermark))
    return [(field(r, "value"), field(r, "ts"), field(r, "seq")) for r in records]


def sorted_by_operator(jvm: Any, records: Any) -> list[Any]:
    """`records` sorted as BatchedVersions.ready sorts them: HeldInput.ORDER, a stable sort."""
    items = jvm.java.util.ArrayList(records)
    jvm.java.util.Collections.sort(items, jvm.io.modstream.flink.HeldInput.ORDER)
    return list(items)


def field(record: Any, name: str) -> Any:
    """A HeldInput.Record's field (py4j reads fields by name only)."""
    return get_field(record, name)


def readied(jvm: Any, memory: Any, watermark: int) -> list[str]:
    keys = jvm.java.util.LinkedHashSet()
    memory.readied(watermark, keys)
    return list(keys)


def test_a_watermark_readies_the_keys_at_or_before_it_and_leaves_later_input_held(
    jvm: Any,
) -> None:
    memory = held(
        jvm,
        [
            ("v2", "t", "b-20", 20, 0),
            ("v1", "t", "a-10", 10, 0),
            ("v1", "t", "a-30", 30, 0),
            ("v3", "t", "c-10", 10, 0),
        ],
    )
    assert readied(jvm, memory, 20) == ["v1", "v3", "v2"]  # by ts, then first arrival
    assert readied(jvm, memory, 20) == []  # readied once
    assert taken(jvm, memory, "v1", 20) == [("a-10", 10, 0)]
    assert memory.size() == 3
    assert readied(jvm, memory, 29) == []
    assert readied(jvm, memory, 30) == ["v1"]
    assert taken(jvm, memory, "v1", 30) == [("a-30", 30, 0)]
    assert taken(jvm, memory, "v1", 30) == []


def test_a_keys_records_leave_by_ts_then_seq_then_arrival(jvm: Any) -> None:
    memory = held(
        jvm,
        [
            ("v1", "t", "second-at-5", 5, 0),
            ("v1", "t", "seq-2", 5, 2),
            ("v1", "t", "at-4", 4, 0),
            ("v1", "t", "third-at-5", 5, 0),
            ("v1", "t", "seq-1", 5, 1),
        ],
    )
    order = [field(r, "value") for r in sorted_by_operator(jvm, memory.take("v1", 5))]
    assert order == ["at-4", "second-at-5", "third-at-5", "seq-1", "seq-2"]
    assert (memory.size(), memory.chars()) == (0, 0)


def test_a_checkpoint_restores_each_key_group_where_it_is_owned_in_arrival_order(jvm: Any) -> None:
    flink = jvm.io.modstream.flink
    records = [(f"v{n % 7}", "t", f"value-{n}", 100 + n % 3, 0) for n in range(40)]
    memory = held(jvm, records)
    groups = memory.snapshot(MAX_PARALLELISM)
    by_key = {key: flink.HeldInput.keyGroup(key, MAX_PARALLELISM) for key, *_ in records}
    assert by_key == {key: flink_key_group(jvm, key) for key in by_key}
    assert set(groups.keySet()) == set(by_key.values())
    # Rescaled to two subtasks: the first owns key groups 0-63, the second 64-127.
    halves = [jvm.io.modstream.flink.HeldInput(), jvm.io.modstream.flink.HeldInput()]
    for group in groups.keySet():
        halves[0 if group < MAX_PARALLELISM // 2 else 1].restore(groups.get(group))
    assert sum(half.size() for half in halves) == len(records)
    for key, group in by_key.items():
        owner = halves[0 if group < MAX_PARALLELISM // 2 else 1]
        other = halves[1 if group < MAX_PARALLELISM // 2 else 0]
        expected = [value for k, _, value, _, _ in records if k == key]
        assert [field(r, "value") for r in owner.take(key, 1_000)] == expected  # arrival order
        assert list(other.take(key, 1_000)) == []
    assert readied(jvm, halves[0], 1_000) == [] and readied(jvm, halves[1], 1_000) == []


def flink_key_group(jvm: Any, key: str) -> int:
    """The key group Flink gives a decoded row keyed on `key`: the job's key selector (FieldKey
    on the row's key field), then Flink's own assignment."""
    row = jvm.org.apache.flink.types.Row.withPositions(2)
    row.setField(0, "keyed")
    row.setField(1, key)
    selected = jvm.io.modstream.flink.FieldKey.selector(1).getKey(row)
    assignment = jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment
    return int(assignment.assignToKeyGroup(selected, MAX_PARALLELISM))


def test_a_snapshot_of_another_format_is_refused(jvm: Any) -> None:
    memory = held(jvm, [("v1", "t", "x", 1, 0)])
    (snapshot,) = (bytearray(group) for group in memory.snapshot(MAX_PARALLELISM).values())
    assert snapshot[1] == 1  # [FORMAT, ...]: fixarray of 2, then the format, 1
    snapshot[1] = 2
    with pytest.raises(Py4JJavaError, match="held input of an unknown format: 2"):
        jvm.io.modstream.flink.HeldInput().restore(bytes(snapshot))


# Strings about each MessagePack head's bounds (fixstr below 32 bytes, str8, str16, str32), in
# ASCII and not (two-byte, three-byte and four-byte UTF-8, a surrogate pair in Java).
EDGE_STRINGS = [
    "",
    "a" * 31,
    "a" * 32,
    "b" * 255,
    "b" * 256,
    "c" * 65_535,
    "c" * 65_536,
    "é",
    "é" * 16,
    "日本" * 50,
    "x" * 254 + "é",
    "🙂 emoji",
    '{"text":"naïve \\u00e9"}',
]
EDGE_INTEGERS = [
    0, 1, 127, 128, -1, -32, -33, 255, 65_536, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63),
]  # fmt: skip


def test_a_snapshot_is_messagepack_that_msgspec_reads_back_at_every_size_and_character(
    jvm: Any,
) -> None:
    """MsgPack.Writer (the payloads to Python and the checkpoints) against msgspec's reader: every
    string and integer at the bounds of its head comes back as it went in."""
    import msgspec

    records = [
        (f"k{n}", EDGE_STRINGS[n % len(EDGE_STRINGS)], EDGE_STRINGS[-1 - n % len(EDGE_STRINGS)],
         EDGE_INTEGERS[n % len(EDGE_INTEGERS)], EDGE_INTEGERS[-1 - n % len(EDGE_INTEGERS)])
        for n in range(len(EDGE_STRINGS) * len(EDGE_INTEGERS))
    ]  # fmt: skip
    memory = held(jvm, records)
    before = memory.chars()
    first = {int(group): bytes(data) for group, data in memory.snapshot(MAX_PARALLELISM).items()}
    read: list[tuple[str, str, str, int, int]] = []
    for group in first.values():
        held_format, rows = msgspec.msgpack.decode(group)
        assert held_format == 1
        read += [tuple(row) for row in rows]
    assert sorted(read) == sorted(records)
    # The next checkpoint copies each record's entry as the first made it: the same bytes. The
    # entries count toward the spill bound while held, and leave with their records.
    again = {int(group): bytes(data) for group, data in memory.snapshot(MAX_PARALLELISM).items()}
    assert again == first
    assert memory.chars() > before
    for key, *_ in records:
        memory.take(key, 2**63 - 1)
    assert (memory.size(), memory.chars()) == (0, 0)


@pytest.mark.parametrize("count", [15, 16, 300])
def test_a_snapshot_sized_to_its_entries_is_the_snapshot_grown_to_them(
    jvm: Any, count: int
) -> None:
    """A key group's snapshot is written into an array sized to its entries (exactly, once every
    entry was made at an earlier checkpoint): the same bytes, whatever the array head's size
    (fixarray below 16 records, array16 from 16), new entries and old ones mixed."""
    import msgspec

    records = [("v1", "t", f"value-{n}-" + "é" * (n % 3), 100 + n, n) for n in range(count)]
    memory = held(jvm, records[: count // 2])
    memory.snapshot(MAX_PARALLELISM)  # the first half's entries made
    for key, topic, value, ts, seq in records[count // 2 :]:
        memory.add(key, jvm.io.modstream.flink.HeldInput.Record(topic, value, ts, seq))
    mixed = [bytes(group) for group in memory.snapshot(MAX_PARALLELISM).values()]
    exact = [bytes(group) for group in memory.snapshot(MAX_PARALLELISM).values()]
    assert mixed == exact and len(exact) == 1
    held_format, rows = msgspec.msgpack.decode(exact[0])
    assert (held_format, [tuple(row) for row in rows]) == (1, records)
