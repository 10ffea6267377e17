"""Hash-bank records at the moderation job's adapters, no JVM (issue 27, point 7): Decode
refuses a tombstone and a record whose key does not name its body (DLQ class `schema`), and
Moderate refuses an entry past its bank's bound (`permanent`), once, leaving its broadcast
state as it was."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import yaml
from pyflink.common import Row

from modstream.contract.records import contract_key
from modstream.core.limits import Limits
from modstream.jobs.metrics import OperatorMetrics
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import Decode
from modstream.jobs.moderation.letters import DLQ_TAG
from modstream.testing.flink import FakeMetricsContext as FakeContext
from modstream.testing.flink import moderate
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import NOTHING_REQUIRED, T0, bank_entry

SHA = "ab" * 32


def decode(key: str | None, raw: str | None, metrics: FakeContext | None = None) -> list[Any]:
    decoder = Decode(ModerationConfig(keyring=NOTHING_REQUIRED))
    if metrics is not None:
        decoder.metrics = OperatorMetrics(metrics, "decode")
    return list(decoder.process_element(Row("hash.bank", key, raw, T0), None))


def counted(metrics: FakeContext) -> dict[str, int]:
    return {name: counter.count for name, counter in metrics.group.made.items()}


def letter_of(rows: list[Any]) -> dict[str, Any]:
    assert len(rows) == 1 and rows[0][0] is DLQ_TAG, rows
    return dict(json.loads(rows[0][1][2]))


def test_a_tombstone_is_refused_with_class_schema_whatever_its_key() -> None:
    metrics = FakeContext()
    for key in (SHA, f"known_bad:sha256:{SHA}"):
        letter = letter_of(decode(key, None, metrics))
        assert letter["error_class"] == "schema"
        assert "tombstone" in letter["message"] and "op=remove" in letter["message"]
        assert (letter["source_topic"], letter["key"]) == ("hash.bank", key)
    assert counted(metrics) == {
        "modstream/reason=tombstone/bank_refused": 2,
        "modstream/error_class=schema/dlq": 2,
    }


def test_a_record_whose_key_names_another_bank_or_hash_is_refused() -> None:
    record, metrics = bank_entry(hash=SHA), FakeContext()
    for key in (f"partner_feed:sha256:{SHA}", "cd" * 32, None):
        letter = letter_of(decode(key, json.dumps(record), metrics))
        assert letter["error_class"] == "schema", key
        assert "does not match" in letter["message"]
        assert letter["key"] == f"known_bad:sha256:{SHA}"  # `dlq replay` sends it keyed right
    assert counted(metrics)["modstream/reason=key/bank_refused"] == 3


def test_the_contract_key_and_the_bare_hash_are_admitted() -> None:
    record = bank_entry(hash=SHA)
    assert contract_key("hash.bank", record) == f"known_bad:sha256:{SHA}"
    for key in (contract_key("hash.bank", record), SHA):
        [row] = decode(key, json.dumps(record))
        assert row[0] == "broadcast" and row[1] == "hash.bank", key


def bank_row(event_id: str, sha: str, at: int = T0, op: str = "add") -> Row:
    record = bank_entry(event_id=event_id, hash=sha, ts=at, op=op)
    return Row("broadcast", "hash.bank", "hash.bank", json.dumps(record), at, 0, "")


def test_an_entry_past_the_banks_bound_goes_to_the_dlq_once_and_changes_nothing() -> None:
    config = ModerationConfig(
        keyring=NOTHING_REQUIRED,
        trusted_policy=yaml.safe_load(GLOBAL_YAML.read_text()),
        limits=dataclasses.replace(Limits(), max_bank_entries=1),
    )
    adapter, _, ctx = moderate(config)
    metrics = FakeContext()
    adapter.adapter.metrics = OperatorMetrics(metrics, "moderate")
    assert list(adapter.process_broadcast_element(bank_row("a", SHA), ctx)) == []
    stored = dict(ctx.broadcast)
    [row] = adapter.process_broadcast_element(bank_row("b", "cd" * 32), ctx)
    letter = json.loads(row[2])
    assert (row[0], letter["error_class"]) == ("moderation.dlq", "permanent")
    assert "max_bank_entries 1" in letter["message"]
    assert counted(metrics) == {
        "modstream/reason=bound/bank_refused": 1,
        "modstream/error_class=permanent/dlq": 1,
    }
    assert dict(ctx.broadcast) == stored
    _, banks = adapter._current(ctx)
    assert banks.matches("cd" * 32, None, T0, 0) == frozenset()
    # A removal of the held hash still applies: a wrong entry can leave a full bank.
    assert list(adapter.process_broadcast_element(bank_row("r", SHA, T0 + 1, "remove"), ctx)) == []
    assert banks.matches(SHA, None, T0 + 1, 0) == frozenset()
    assert len(ctx.broadcast) == 2
