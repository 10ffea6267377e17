"""`modstream replay` with a few hundred fuzzed lines mixed into a generated workload: it exits
0, every fuzzed line is in moderation.dlq.jsonl exactly once, and every other output is
identical to a replay of the workload alone (one hostile record changes nothing but the DLQ).

The fuzzed lines target the workload's own content versions, and come in every form a replay
file can hold them: the record as a JSON string value (bytes as a topic would deliver them), as
a JSON object value, and as a file line that is not UTF-8 at all."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import strategies as st

from modstream.demo.workload import generate, sign_lines
from modstream.testing.fuzz.strategies import (
    KINDS,
    REFUSED_CLASSES,
    Fuzzed,
    applicable,
    fuzzed,
    records,
    sample,
)
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.stack import run_replay

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]
POLICY_KEY = "fuzz-replay-key"
PER_CLASS = 16  # 16 classes: 256 fuzzed lines
PLACEHOLDER = "fzq00000q"  # every fuzzed record's event_id, then its own marker (same length)
TIME_CLASSES = ("ts_far_ahead", "ts_far_behind")  # refused for keyed input only


def marker(index: int) -> str:
    return f"fzq{index:05d}q"


def kind_of(topic: str, value: dict[str, Any]) -> str | None:
    if topic == "content.versions":
        return "upsert" if value.get("type") == "upsert" else "delete"
    if topic == "policy.rules":
        return "policy_control" if "command" in value else "policy_version"
    names = {spec.topic: name for name, spec in KINDS.items() if spec.topic != "content.versions"}
    return names.get(topic)


def bases(workload: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The workload's own valid records per kind: fuzzed records aim at real versions."""
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for line in workload:
        value = line["value"]
        kind = kind_of(line["topic"], value) if isinstance(value, dict) else None
        if kind is not None and "bad" not in str(value.get("event_id")):
            found[kind].append(value)
    return found


def with_placeholder(record: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": PLACEHOLDER, **{k: v for k, v in record.items() if k != "event_id"}}


def fuzzed_records(workload: list[dict[str, Any]]) -> list[Fuzzed]:
    by_kind = bases(workload)
    found: list[Fuzzed] = []
    for number, mutation in enumerate(REFUSED_CLASSES):
        kinds = [
            kind
            for kind in KINDS
            if applicable(kind, mutation) and (mutation not in TIME_CLASSES or KINDS[kind].keyed)
        ]
        strategies = []
        for kind in kinds:
            base = st.sampled_from(by_kind[kind]) if by_kind[kind] else records(kind)
            strategies.append(fuzzed(kind, mutation, base.map(with_placeholder)))
        count = 4 if mutation == "oversize" else PER_CLASS  # a MiB each
        found += sample(st.one_of(strategies), count, seed=100 + number)
    return found


@dataclass(frozen=True)
class FuzzLine:
    """One fuzzed line of the replay file and what Decode may have received of it."""

    index: int
    fuzz: Fuzzed
    line: bytes
    texts: tuple[bytes, ...]  # candidates for the bytes the DLQ digest was taken of

    @property
    def marker(self) -> str:
        return marker(self.index)


def as_line(index: int, fuzz: Fuzzed, rng: random.Random) -> FuzzLine:
    raw = fuzz.raw.replace(PLACEHOLDER.encode(), marker(index).encode())
    topic = json.dumps(fuzz.topic).encode()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # A file line that is not UTF-8: the record's bytes as an object value.
        line = b'{"topic": ' + topic + b', "value": ' + raw + b"}"
        replaced = line.decode("utf-8", errors="replace").encode("utf-8")
        return FuzzLine(index, fuzz, line, (raw, line, replaced))
    if rng.random() < 0.4 and len(raw) < 65_536 and _is_object(text):
        # The record as an object value, written as it is: duplicated names, NaN and long
        # integers reach the replay as a replay author wrote them.
        line = b'{"topic": ' + topic + b', "value": ' + raw + b"}"
    else:
        line = json.dumps({"topic": fuzz.topic, "value": text}).encode("utf-8")
    return FuzzLine(index, fuzz, line, (raw, text.encode("utf-8", errors="surrogatepass")))


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)  # lenient: NaN, duplicated names
    except (ValueError, RecursionError):
        return False


def write_events(path: Path, workload: list[dict[str, Any]], fuzz: list[FuzzLine]) -> None:
    """The workload (signed as `modstream.demo.workload.write` signs it) with the fuzzed lines
    inserted at seeded positions."""
    lines = [
        json.dumps(line, ensure_ascii=False).encode("utf-8")
        if not isinstance(line["value"], str)
        else json.dumps(line).encode("utf-8")
        for line in sign_lines(workload)
    ]
    rng = random.Random(5)
    for item in fuzz:
        lines.insert(rng.randrange(len(lines) + 1), item.line)
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def replay(events: Path, out: Path) -> dict[str, list[dict[str, Any]]]:
    return run_replay(events, out, GLOBAL_YAML, POLICY_KEY)


@pytest.fixture(scope="module")
def replays(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, list[Any]], dict[str, list[Any]], list[FuzzLine]]:
    base = tmp_path_factory.mktemp("fuzz-replay")
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    workload = generate(
        seed=29, versions=60, policy_document=policy, policy_key=POLICY_KEY.encode()
    )
    rng = random.Random(3)
    fuzz = [as_line(index, item, rng) for index, item in enumerate(fuzzed_records(workload))]
    assert len(fuzz) >= 200
    write_events(base / "plain.jsonl", workload, [])
    write_events(base / "fuzzed.jsonl", workload, fuzz)
    plain = replay(base / "plain.jsonl", base / "plain")
    fuzzed_run = replay(base / "fuzzed.jsonl", base / "fuzzed")
    return plain, fuzzed_run, fuzz


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def owner(letter: dict[str, Any], fuzz: list[FuzzLine]) -> list[int]:
    """The fuzzed lines a DLQ row is about: its marker in `raw` or `key`, or its digest."""
    raw, key = letter.get("raw") or "", letter.get("key") or ""
    found = [item.index for item in fuzz if item.marker in raw or item.marker in key]
    if not found and raw.startswith("sha256:"):
        found = [item.index for item in fuzz if raw in {digest(text) for text in item.texts}]
    return found


def canonical(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(record, sort_keys=True) for record in records)


def check_every_fuzzed_line_is_in_the_dlq_exactly_once(
    replays: tuple[dict[str, list[Any]], dict[str, list[Any]], list[FuzzLine]],
) -> None:
    plain, fuzzed_run, fuzz = replays
    letters = fuzzed_run["moderation.dlq"]
    seen: Counter[int] = Counter()
    others = []
    for letter in letters:
        owners = owner(letter, fuzz)
        assert len(owners) <= 1, (owners, letter)
        if owners:
            seen[owners[0]] += 1
        else:
            others.append(letter)
    missing = [
        (item.fuzz.kind, item.fuzz.mutation, item.fuzz.note)
        for item in fuzz
        if not seen[item.index]
    ]
    assert not missing, f"{len(missing)} fuzzed lines never reached the DLQ: {missing[:10]}"
    twice = [index for index, times in seen.items() if times > 1]
    assert not twice, f"fuzzed lines dead-lettered more than once: {twice[:10]}"
    # The workload's own malformed records are dead-lettered as they are without fuzz.
    assert canonical(others) == canonical(plain["moderation.dlq"])


def check_each_fuzzed_line_gets_its_class(
    replays: tuple[dict[str, list[Any]], dict[str, list[Any]], list[FuzzLine]],
) -> None:
    _, fuzzed_run, fuzz = replays
    by_index = {item.index: item for item in fuzz}
    for letter in fuzzed_run["moderation.dlq"]:
        owners = owner(letter, fuzz)
        if not owners:
            continue
        item = by_index[owners[0]]
        assert letter["error_class"] == item.fuzz.expected_class, (
            item.fuzz.mutation,
            item.fuzz.note,
            letter,
        )


def check_the_workloads_outputs_are_unchanged_by_the_fuzzed_lines(
    replays: tuple[dict[str, list[Any]], dict[str, list[Any]], list[FuzzLine]],
) -> None:
    plain, fuzzed_run, _ = replays
    assert set(plain) == set(fuzzed_run)
    assert len(plain["moderation.decisions"]) > 60
    for topic in sorted(set(plain) - {"moderation.dlq"}):
        assert canonical(fuzzed_run[topic]) == canonical(plain[topic]), topic


def test_fuzzed_lines_in_a_replay(
    replays: tuple[dict[str, list[Any]], dict[str, list[Any]], list[FuzzLine]],
) -> None:
    """The three checks on one replay pair: as separate tests, each of `make test`'s two
    workers replayed the same workload twice for the module's fixture (139 s each in CI)."""
    check_every_fuzzed_line_is_in_the_dlq_exactly_once(replays)
    check_each_fuzzed_line_gets_its_class(replays)
    check_the_workloads_outputs_are_unchanged_by_the_fuzzed_lines(replays)
