"""moderation: what its keyed operators share. The policy and the hash banks live in broadcast
state, and each subtask keeps its own copies, rebuilt once per change; keyed input waits in
`buffer` until the watermark passes its ts (the report gate's, and `Moderate`'s for versions
stored before issue 14)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from modstream.contract import SchemaError, dead_letter, parse
from modstream.contract.review import ReviewGrant
from modstream.contract.signals import HashBankEntry
from modstream.jobs.metrics import NO_METRICS, OperatorMetrics
from modstream.jobs.moderation.config import BROADCAST_STATE, ModerationConfig
from modstream.jobs.moderation.letters import HANDLER_FAILURES, failure_letter
from modstream.policy.store import PolicyStore, Rejected, dead_letter_for
from modstream.review.access import ReviewGrants, state_entry
from modstream.trust.hashbank import BankFull, HashBanks, entry_state


def subtask_index(runtime_context: RuntimeContext) -> int:
    """This parallel instance's index. PyFlink 2.2's thread-mode RuntimeContext still calls
    RuntimeContext.getIndexOfThisSubtask(), which Flink 2 moved to getTaskInfo()."""
    java = getattr(runtime_context, "_runtime_context", None)
    if java is not None:
        return int(java.getTaskInfo().getIndexOfThisSubtask())
    return int(runtime_context.get_index_of_this_subtask())


class PolicyAware(KeyedBroadcastProcessFunction):  # type: ignore[misc]  # PyFlink's classes are untyped
    """Shared by the keyed operators: policy and hash banks in broadcast state (rebuilt once per
    change), and keyed input buffered until the watermark passes its ts (the report gate's;
    `Moderate`'s comes ordered from EventTimeOrder.java, but for versions stored before it)."""

    keeps_banks = True  # the report gate decides nothing on hashes: it holds no bank
    grants: ReviewGrants | None = None  # the reviewers' grants, once loaded (`_load`)
    metrics: OperatorMetrics = NO_METRICS  # each subclass's own, set in its `open`

    def __init__(self, config: ModerationConfig, *, report_rejections: bool) -> None:
        self.config = config
        self.report_rejections = report_rejections

    def open(self, runtime_context: RuntimeContext) -> None:
        self.buffer = runtime_context.get_map_state(
            MapStateDescriptor("buffer", Types.LONG(), Types.STRING())
        )
        self.subtask = subtask_index(runtime_context)
        self.key = self.config.policy_key.encode("utf-8") if self.config.policy_key else None
        self.store: PolicyStore | None = None
        self.banks: HashBanks | None = None
        self.grants: ReviewGrants | None = None
        self.loaded_revision = -1

    def _load(self, state: Any) -> tuple[PolicyStore, HashBanks]:
        """The policies, rebuilt when their revision moved; the hash banks, built once from
        broadcast state (one `bankentry:…` key per entry, or `bank:<hash_type>:<hash>` per hash
        as before issue 27) after a start or restore, then kept in sync record by record
        (`process_broadcast_element`)."""
        revision = int(state.get("revision") or 0)
        if self.store is None or revision != self.loaded_revision:
            self.store = PolicyStore.from_records(
                json.loads(state.get("policies") or "[]"),
                trusted=self.config.trusted_policy,
                keyring=self.config.keyring,
            )
            self.loaded_revision = revision
        if self.grants is None:
            self.grants = ReviewGrants.from_state(state.items())
        if self.banks is None:
            bound = self.config.limits.max_bank_entries
            self.banks = (
                HashBanks.from_state(state.items(), bound)
                if self.keeps_banks
                else HashBanks(max_entries_per_bank=bound)
            )
            legacy = state.get("banks") if self.keeps_banks else None
            for entry in json.loads(legacy or "{}").get("entries", []):  # before issue 12
                self.banks.add_entry(
                    entry["hash_type"],
                    entry["hash"],
                    entry["ts"],
                    entry["op"],
                    entry["bank"],
                    bounded=False,
                )
        return self.store, self.banks

    def _current(self, ctx: Any) -> tuple[PolicyStore, HashBanks]:
        """The policies and banks in force. Every subtask applies every broadcast record to its
        own copies itself, so broadcast state is read only once after a start or restore (each
        read is a Java call, on every timer: 0.8 s of a 2,000-version replay)."""
        if self.store is None or self.banks is None:
            return self._load(ctx.get_broadcast_state(BROADCAST_STATE))
        return self.store, self.banks

    def process_broadcast_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        state = ctx.get_broadcast_state(BROADCAST_STATE)
        store, banks = self._load(state)
        topic, raw, ts = value[2], value[3], value[4]
        try:
            if topic != "policy.rules":
                self._apply_entry(topic, state, banks, raw)
                return
            changed = store.apply(raw, self.key)
        except BankFull as full:
            # Every subtask refuses it alike (same records, same order): one DLQ row.
            if self.report_rejections and self.subtask == 0:
                self.metrics.inc("bank_refused", reason="bound")
                yield self._bank_letter(raw, str(full), ts, topic)  # counted by `Moderate`
            return
        except (Rejected, SchemaError) as error:
            # Every subtask of every keyed operator sees each broadcast record: one DLQ row.
            if self.report_rejections and self.subtask == 0:
                letter = dead_letter_for(raw, error, ts=ts, source_topic=topic)
                yield Row(self.config.physical("moderation.dlq"), None, letter.model_dump_json())
            return
        except HANDLER_FAILURES as error:
            if self.report_rejections and self.subtask == 0:
                yield failure_letter(self.config, topic, None, raw, ts, error)
            return
        if not changed:
            return
        self.loaded_revision += 1
        state.put("revision", str(self.loaded_revision))
        state.put("policies", json.dumps(store.to_records()))

    def _apply_entry(self, topic: str, state: Any, banks: HashBanks, raw: str) -> None:
        """One hash.bank or review.grants record (admitted by decode) applied and persisted as
        one small broadcast-state value, written once: an add costs the same whatever its hash
        (or reviewer) holds, and loading is linear in the entries."""
        if topic == "review.grants":
            self._apply_grant(state, raw)
            return
        entry = parse("hash.bank", raw)
        assert isinstance(entry, HashBankEntry)
        held = banks.apply(entry) if self.keeps_banks else None
        if held is not None:
            state.put(*entry_state(entry.hash_type, entry.hash, held))

    def _apply_grant(self, state: Any, raw: str) -> None:
        """One review.grants record into the reviewers' grant history."""
        grant = parse("review.grants", raw)
        assert isinstance(grant, ReviewGrant) and self.grants is not None
        if self.grants.apply(grant.reviewer_id, grant.queues, grant.ts):
            # One small value per grant, written once: a reviewer's history is kept.
            state.put(*state_entry(grant.reviewer_id, grant.queues, grant.ts))

    def _bank_letter(self, raw: str, message: str, ts: int, topic: str) -> Row:
        """The DLQ row of a hash.bank record its bank's bound refused (class `permanent`)."""
        letter = dead_letter(
            topic, None, raw, message, ts=ts, error_class="permanent", operator="moderation"
        )
        return Row(self.config.physical("moderation.dlq"), None, letter.model_dump_json())

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        self._hold(int(value[4]), [(value[2], value[3], int(value[5] or 0))], ctx)
        return iter(())

    def _hold(self, ts: int, entries: list[tuple[str, str, int]], ctx: Any) -> None:
        """(topic, raw, seq) entries kept under `ts` in `buffer` until the timer at `ts`."""
        pending = self.buffer.get(ts)
        held = json.loads(pending) if pending else []
        self.buffer.put(ts, json.dumps(held + [list(entry) for entry in entries]))
        ctx.timer_service().register_event_time_timer(ts)

    def _drain(self, timestamp: int) -> list[tuple[str, str, int]]:
        """The input buffered for `timestamp`, in sequence order (stable: arrival order)."""
        pending = self.buffer.get(timestamp)
        if not pending:
            return []
        self.buffer.remove(timestamp)
        entries = sorted(json.loads(pending), key=lambda entry: entry[2])
        return [(topic, raw, seq) for topic, raw, seq in entries]
