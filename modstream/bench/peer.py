"""The hand-written service a team would build instead of the Flink job: plain Kafka consumers
running the moderation job's own per-version code
(`modstream.jobs.moderation.moderate.Moderate.apply`, which calls `modstream.moderation.step.step`
and `on_timer`), written fairly: batched polls, batched produce, no sleeps. At-least-once
(`confluent-kafka-eos`: exactly-once on the wire, see `ConfluentEosClient`): outputs are flushed
(acks=all) before the offsets of the poll that made them are committed; state lives in a dict and is
lost on a crash (no checkpoint).

Event time as the job keeps it, simplified: per partition the newest admitted `ts`; the watermark
is the smallest over partitions heard within the last second (every partition silent: the
newest read), less the bound. Input is buffered
per (version, ts) and applied when the watermark passes it, the version's timers with it, as the
job's `Moderate` does. The same outputs as the job (issue 26: the same outputs on every side):
the sanctions stage (modstream/enforcement/sanctions.py, keyed by author, each version's decisions
applied at the time they were emitted, as modstream/jobs/moderation/sanctions.py applies them) and a
DLQ letter for every refused input and every input set aside. Not here: the report gate (every
report weighs 1) and hash-bank updates after start.

    python -m modstream.bench.peer --client kafka-python --topics-prefix bench-1234abcd
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from modstream.contract.dlq import dead_letter
from modstream.contract.review import ReviewGrant
from modstream.enforcement import sanctions
from modstream.jobs.moderation.config import ModerationConfig
from modstream.jobs.moderation.decode import admit
from modstream.jobs.moderation.letters import TIMERS, failure_letter
from modstream.jobs.moderation.moderate import _TIMER, Moderate
from modstream.moderation import state_schema
from modstream.moderation import step as moderation
from modstream.moderation.admission import Refused
from modstream.moderation.step import KEYED_TOPICS
from modstream.policy.store import PolicyStore
from modstream.review.grants import ReviewGrants
from modstream.trust.hashbank import HashBanks

IDLE_MS = 1_000


@dataclass
class Engine:
    """Admission, event time, per-version state and timers: everything but the Kafka client."""

    config: ModerationConfig
    out_of_orderness_ms: int = 500
    states: dict[str, bytes] = field(default_factory=dict)  # version key -> stored state
    buffer: dict[tuple[str, int], list[tuple[str, str, int]]] = field(default_factory=dict)
    timers: list[tuple[int, str]] = field(default_factory=list)  # heap of (ts, version key)
    armed: set[tuple[int, str]] = field(default_factory=set)
    lanes: dict[str, tuple[int, float]] = field(default_factory=dict)  # newest ts, heard at
    refused: int = 0
    # The sanctions stage: author -> stored account state; (author, emitted at) -> decisions;
    # a heap of (emitted at or account timer, author).
    accounts: dict[str, str] = field(default_factory=dict)
    decided: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    account_timers: list[tuple[int, str]] = field(default_factory=list)
    account_armed: set[tuple[int, str]] = field(default_factory=set)
    letters: list[tuple[str, str | None, str]] = field(default_factory=list)  # refused input
    # False: decisions for the sanctions stage are dropped (the in-process step bench measures
    # the per-version code alone).
    sanctions_stage: bool = True

    def __post_init__(self) -> None:
        self.store = PolicyStore.from_records(
            [], trusted=self.config.trusted_policy, keyring=self.config.keyring
        )
        self.banks = HashBanks()
        self.moderate = Moderate(self.config)  # its pure per-version code; no Flink runtime

    def admit(self, topic: str, raw: str, lane: str, record_ts: int) -> None:
        """One record read from `topic` (contract name) on partition `lane`."""
        if topic not in KEYED_TOPICS and topic != "review.grants":
            return
        verdict = admit(self.config, topic, raw, record_ts, None)
        if isinstance(verdict, Refused):
            self.refused += 1
            letter = dead_letter(
                self.config.physical(topic),
                verdict.key,
                raw,
                verdict.message,
                ts=verdict.ts,
                error_class=verdict.error_class,  # type: ignore[arg-type]
                operator="moderation",
            )
            dlq = self.config.physical("moderation.dlq")
            self.letters.append((dlq, verdict.key, letter.model_dump_json()))
            return
        if isinstance(verdict.record, ReviewGrant):  # as the job's broadcast state holds them
            grant = verdict.record
            self.moderate.grants = self.moderate.grants or ReviewGrants()
            self.moderate.grants.apply(grant.reviewer_id, grant.queues, grant.ts)
            return
        record, ts = verdict.record, verdict.ts
        key = f"{record.content_id}\x1f{record.content_version}"  # type: ignore[attr-defined]
        self.buffer.setdefault((key, ts), []).append((topic, record.model_dump_json(), ts))
        self._arm(ts, key)
        if topic != "moderation.reevaluate":
            newest = max(self.lanes.get(lane, (ts, 0.0))[0], ts)
            self.lanes[lane] = (newest, time.monotonic())

    def drain(self, until: int) -> Iterator[tuple[str, str | None, str]]:
        """Fire everything armed up to `until`, whatever the lanes say (the in-process bench)."""
        yield from self._through(until)

    def _through(self, watermark: int) -> Iterator[tuple[str, str | None, str]]:
        """The refused input's letters, then every version timer up to `watermark`, then every
        author's decisions and account timers up to it (as the job's sanctions operator runs
        after the version operator)."""
        yield from self.letters
        self.letters.clear()
        while self.timers and self.timers[0][0] <= watermark:
            ts, key = heapq.heappop(self.timers)
            self.armed.discard((ts, key))
            yield from self._fire(key, ts)
        while self.account_timers and self.account_timers[0][0] <= watermark:
            ts, user_id = heapq.heappop(self.account_timers)
            self.account_armed.discard((ts, user_id))
            yield from self._sanction(user_id, ts)

    def _arm(self, ts: int, key: str) -> None:
        if (ts, key) not in self.armed:
            self.armed.add((ts, key))
            heapq.heappush(self.timers, (ts, key))

    def watermark(self) -> int:
        now = time.monotonic()
        speaking = [ts for ts, at in self.lanes.values() if now - at < IDLE_MS / 1000]
        newest = [ts for ts, _ in self.lanes.values()]
        if not newest:
            return -(2**63)
        # Every partition silent: what was read is complete (the job's rule after its drain time).
        return (min(speaking) if speaking else max(newest)) - self.out_of_orderness_ms - 1

    def advance(self) -> Iterator[tuple[str, str | None, str]]:
        """Fire every (version, ts) the watermark passed, then every author's decisions and
        account timers it passed: (physical topic, key, value) out."""
        yield from self._through(self.watermark())

    def _arm_account(self, ts: int, user_id: str) -> None:
        if (ts, user_id) not in self.account_armed:
            self.account_armed.add((ts, user_id))
            heapq.heappush(self.account_timers, (ts, user_id))

    def _sanction(self, user_id: str, ts: int) -> Iterator[tuple[str, str | None, str]]:
        """modstream/jobs/moderation/sanctions.py's `on_timer`: the decisions emitted at `ts`, or
        the account's own timer, applied to the author's state."""
        state = state_schema.load(self.accounts.get(user_id), "account")
        pending = self.decided.pop((user_id, ts), None)
        if pending:
            result, failed = sanctions.on_decisions(state, user_id, pending)
            for decision, error in failed:
                raw = json.dumps(decision)
                row = failure_letter(
                    self.config, "moderation.decisions", decision.get("content_id"), raw, ts, error
                )
                yield row[0], row[1], row[2]
        else:
            expired = sanctions.on_timer(state, ts)
            result = sanctions.SanctionResult(expired.state, timers=expired.timers)
        if result.state is None:
            self.accounts.pop(user_id, None)
        else:
            self.accounts[user_id] = state_schema.dump(result.state)
        for timer in result.timers:
            self._arm_account(timer, user_id)
        for topic, key, output in result.outputs:
            value = json.dumps(output, separators=(",", ":"), ensure_ascii=False)
            yield self.config.physical(topic), key, value

    def _fire(self, key: str, ts: int) -> Iterator[tuple[str, str | None, str]]:
        inputs = self.buffer.pop((key, ts), [])
        (state, outputs, timers, letters), set_aside = self.moderate.apply(
            self.states.get(key), inputs, ts, self.store, self.banks
        )
        self.refused += len(set_aside)
        if state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = self.moderate.decoded.dump(state)
        for timer in set(timers):
            self._arm(timer, key)
        for topic, out_key, value in self.moderate._rows(outputs, letters, ts):
            if topic == moderation.SANCTIONS:  # to the author's stage, at the time emitted
                if not self.sanctions_stage:
                    continue
                if out_key is None:  # records.sanction_input keys each entry by its author
                    raise ValueError("a sanctions entry without its author's id")
                entry = json.loads(value)
                at = int(entry.pop("at"))
                self.decided.setdefault((out_key, at), []).append(entry)
                self._arm_account(at, out_key)
            else:
                yield topic, out_key, value
        content_id = key.split("\x1f", 1)[0]
        for index, error in sorted(set_aside.items()):
            topic, raw, at = inputs[index] if index != _TIMER else (TIMERS, "", ts)
            row = failure_letter(self.config, topic, content_id, raw, at, error)
            yield row[0], row[1], row[2]


class Client(Protocol):
    def poll(self) -> list[tuple[str, str | None, str, int, int]]: ...
    def send(self, topic: str, key: str | None, value: str) -> None: ...
    def commit(self) -> None: ...

    def flush(self) -> None: ...
    def close(self) -> None: ...


class KafkaPythonClient:
    """kafka-python: the client the project already uses."""

    def __init__(self, bootstrap: str, topics: list[str], group: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer

        self.consumer = KafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            max_poll_records=2000,
            fetch_max_wait_ms=50,
        )
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=256 * 1024
        )

    def poll(self) -> list[tuple[str, str | None, str, int, int]]:
        out = []
        for records in self.consumer.poll(timeout_ms=100).values():
            for r in records:
                key = r.key.decode("utf-8") if r.key is not None else None
                value = r.value.decode("utf-8", "replace") if r.value is not None else ""
                out.append((r.topic, key, value, r.partition, r.timestamp))
        return out

    def send(self, topic: str, key: str | None, value: str) -> None:
        self.producer.send(topic, key=key.encode() if key else None, value=value.encode())

    def commit(self) -> None:
        self.producer.flush()
        self.consumer.commit()

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()
        self.consumer.close()


class ConfluentClient:
    """confluent-kafka (librdkafka): the fastest Python client a team could pick."""

    def __init__(self, bootstrap: str, topics: list[str], group: str) -> None:
        from confluent_kafka import Consumer, Producer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe(topics)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def poll(self) -> list[tuple[str, str | None, str, int, int]]:
        out = []
        for m in self.consumer.consume(num_messages=2000, timeout=0.1):
            if m.error() is not None:
                continue
            key, value = m.key(), m.value()
            out.append(
                (
                    str(m.topic()),
                    key.decode("utf-8") if key is not None else None,
                    value.decode("utf-8", "replace") if value is not None else "",
                    int(m.partition() or 0),
                    m.timestamp()[1],
                )
            )
        return out

    def send(self, topic: str, key: str | None, value: str) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value)
                return
            except BufferError:
                self.producer.poll(0.05)  # the local queue is full: let it drain

    def commit(self) -> None:
        self.producer.flush()
        self.consumer.commit(asynchronous=False)

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.flush()
        self.consumer.close()


class ConfluentEosClient(ConfluentClient):
    """confluent-kafka, exactly-once as far as Kafka goes: a transactional producer whose
    transaction carries the outputs of a poll and the consumer offsets past it
    (`send_offsets_to_transaction`), committed together or not at all: what a team writes to
    match the job's guarantee on the wire. Still not the job's: the state dict, the buffered input
    and the timers live in memory only, so a restart loses every version's evidence so far and
    the input read past the committed offsets but not yet fired (a changelog topic written in the
    same transaction and read back at start, as Kafka Streams does, would be the next thing to
    write), and one transactional id means one instance (no fencing across a rebalance)."""

    def __init__(self, bootstrap: str, topics: list[str], group: str) -> None:
        super().__init__(bootstrap, topics, group)
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"{group}-peer",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        self.producer.init_transactions()
        self.open = False

    def _begin(self) -> None:
        if not self.open:
            self.producer.begin_transaction()
            self.open = True

    def send(self, topic: str, key: str | None, value: str) -> None:
        self._begin()
        super().send(topic, key, value)

    def commit(self) -> None:
        """The poll's outputs and the offsets after it, in one transaction."""
        self._begin()
        positions = [
            partition
            for partition in self.consumer.position(self.consumer.assignment())
            if partition.offset >= 0
        ]
        if positions:
            self.producer.send_offsets_to_transaction(
                positions, self.consumer.consumer_group_metadata()
            )
        self.producer.commit_transaction()
        self.open = False

    def flush(self) -> None:
        if self.open:
            self.producer.commit_transaction()
            self.open = False

    def close(self) -> None:
        self.flush()
        self.consumer.close()


CLIENTS: dict[str, Callable[[str, list[str], str], Client]] = {
    "kafka-python": KafkaPythonClient,
    "confluent-kafka": ConfluentClient,
    "confluent-kafka-eos": ConfluentEosClient,
}


def serve(client: Client, engine: Engine, contract: dict[str, str], stop: Any) -> int:
    """Poll, admit, fire, produce, flush, commit, until `stop()`; the records read."""
    read = 0
    while not stop():
        batch = client.poll()
        for physical, _key, value, partition, record_ts in batch:
            engine.admit(
                contract.get(physical, physical), value, f"{physical}#{partition}", record_ts
            )
        read += len(batch)
        produced = False
        for topic, key, value in engine.advance():
            client.send(topic, key, value)
            produced = True
        if batch:
            client.commit()
        elif produced:  # timers fired with nothing read: no new offsets to commit
            client.flush()
    return read


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal
    from pathlib import Path

    import yaml

    from modstream.core.config import Settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--client", choices=sorted(CLIENTS), required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--policy", type=Path, required=True, help="the trusted policy file")
    parser.add_argument("--topic", action="append", default=[], help="contract=physical")
    parser.add_argument("--out-of-orderness-ms", type=int, default=500)
    args = parser.parse_args(argv)
    topics = dict(item.split("=", 1) for item in args.topic)
    config = ModerationConfig.from_options(
        None,
        trusted_policy=yaml.safe_load(args.policy.read_text(encoding="utf-8")),
        policy_key_from_env=False,
        topics=topics,
    )
    engine = Engine(config, out_of_orderness_ms=args.out_of_orderness_ms)
    physical = [topics.get(name, name) for name in (*KEYED_TOPICS, "review.grants")]
    client = CLIENTS[args.client](Settings.from_env().bootstrap_servers, physical, args.group)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    print(f"peer {args.client}: running", flush=True)
    try:
        read = serve(client, engine, {v: k for k, v in topics.items()}, lambda: bool(stopping))
    finally:
        client.close()
    print(json.dumps({"client": args.client, "read": read, "refused": engine.refused}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
