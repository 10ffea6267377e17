"""moderation: the job's configuration and the row shapes its operators hand each other.

Apart from the job module (modstream/jobs/moderation/job.py) so that the adapters
(jobs/moderation_*.py) and the wiring share them without importing each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyflink.common import Types
from pyflink.datastream.state import MapStateDescriptor

from modstream.core.limits import Limits
from modstream.jobs import runtime
from modstream.moderation import step as moderation
from modstream.trust.signing import Keyring

# Row(kind, key, topic, value, ts, seq, lane): kind "keyed" | "broadcast" | "report"; seq orders
# records of equal ts that reach a key by different paths (replay: the line number; Kafka: 0);
# lane is where an admitted record came from (`topic#partition@offset`), or "" for records that
# never move event time (policy, control and hash-bank records, re-evaluation requests).
DECODED_ROW = Types.ROW(
    [
        Types.STRING(),
        Types.STRING(),
        Types.STRING(),
        Types.STRING(),
        Types.LONG(),
        Types.LONG(),
        Types.STRING(),
    ]
)
BROADCAST_STATE = MapStateDescriptor("moderation_broadcast", Types.STRING(), Types.STRING())
# A viral item's report storm: reports are combined per (version, shard, window) before the
# version's own operator, so one hot key costs one state read and write per window and shard
# (the window: modstream/moderation/rules/reports.py, REPORT_WINDOW_MS).
REPORT_SHARDS = 8
# Decode's input in batches (MiniBatch.java), one Python call each (BatchedDecode.java): up to
# DECODE_BATCH records, at most DECODE_WAIT_MS after the first; a refused record rides as route
# DLQ_ROUTE.
DECODE_BATCH = 256
DECODE_WAIT_MS = 10
# --state-cache-versions: the decoded version states a keyed operator instance keeps (see
# ModerationConfig.state_cache_versions; docs/BENCHMARKS.md, issue 26 stop 50).
STATE_CACHE_VERSIONS = 8192
DLQ_ROUTE = "dlq"
# The batched engine's retro join input: an upload or bank record once per hash key it belongs
# to, as Row(HASH_ROUTE, hash key, "upload" | "bank", payload JSON, ts, seq, ""), emitted by
# decode after the record itself (modstream/jobs/moderation/hash_retro.py `fan_out`), never moving
# event time.
HASH_ROUTE = "hash"
ENGINES = ("pyflink", "batched")  # --engine (modstream/jobs/moderation/job.py, issue 26)
ENGINE_BATCHED = "batched"
# EventTimeOrder.java's batch: Row(topics, values, stamps, seqs) of one version, in order.
ORDERED_BATCH = Types.ROW(
    [
        Types.BASIC_ARRAY(Types.STRING()),
        Types.BASIC_ARRAY(Types.STRING()),
        Types.BASIC_ARRAY(Types.LONG()),
        Types.BASIC_ARRAY(Types.LONG()),
    ]
)
# Moderate's output: Row(topics, keys, values), all it emitted for one batch or timer.
OUTPUT_BATCH = Types.ROW([Types.BASIC_ARRAY(Types.STRING())] * 3)
REPORT_BATCH = "moderation.reports#batch"
# The options of `python -m modstream.jobs.moderation` that are fields of its configuration, by
# the field's name (modstream/jobs/moderation/job.py's parser): the job passes its parsed
# options, replay the few it sets, the bench and its peer none (the fields' defaults).
OPTION_FIELDS = (
    "policy_id",
    "out_of_orderness_ms",
    "idleness_ms",
    "live_window_ms",
    "backfill_idleness_ms",
    "drained_after_ms",
    "state_ttl_ms",
    "review_retention_ms",
    "evidence_grace_ms",
    "engine",
    "batch_interval_ms",
    "held_input_max_chars",
    "state_cache_versions",
    "pre_key_parallelism",
)
POLICY_KEY_VARIABLE = "MODSTREAM_POLICY_KEY"


@dataclass(frozen=True, kw_only=True)
class ModerationConfig(runtime.TopicNames):
    policy_id: str = "global"
    out_of_orderness_ms: int = 5_000
    idleness_ms: int = 10_000
    policy_key: str | None = None  # the deployment's HMAC key (MODSTREAM_POLICY_KEY)
    trusted_policy: dict[str, Any] | None = None  # replay's --policy document
    # Parallelism of everything before key_by (decode, event time): replay uses 1 so file
    # order survives; the job's --pre-key-parallelism 1 keeps one event-time instance that
    # reads every partition while the keyed operators run wider (docs/moderation.md, "Time").
    pre_key_parallelism: int | None = None
    limits: Limits = field(default_factory=Limits)
    # Producers' and approvers' keys; which authority topics must be signed (operators/signing).
    keyring: Keyring = field(default_factory=Keyring)
    # Event time (docs/moderation.md, "Time"): the processing clock is the wall clock unless
    # fixed (replay fixes it at its start, so its admission does not depend on how long it runs);
    # `wall_clock` lets event time follow the processing clock when every lane is live or quiet.
    now_ms: int | None = None
    wall_clock: bool = True
    live_window_ms: int = moderation.LIVE_WINDOW_MS
    backfill_idleness_ms: int = 5_000
    # The lanes (`topic#partition`) the event-time step reads, known before any is heard from:
    # after a start or restore each holds event time until its first record (ValidatedTime).
    expected_lanes: tuple[str, ...] = ()
    # Where the lanes' ends are asked (bootstrap servers, consumer group): a lane whose input is
    # on the broker but not read yet holds event time (ValidatedTime, EndOffsets). "" in replay.
    end_offsets: tuple[str, str] = ("", "")
    # Their admin client's security (KEY=VALUE, JobConfig.kafka_properties).
    end_offsets_properties: tuple[str, ...] = ()
    # Every lane silent and behind this long: what was read is complete (before: a stall).
    drained_after_ms: int = 60_000
    # Retention (docs/moderation.md, "Retention"): full state after a version's last input,
    # then its compact record, in which reviews and appeals still apply.
    state_ttl_ms: int = moderation.STATE_TTL_MS
    review_retention_ms: int = moderation.REVIEW_RETENTION_MS
    # How long a detector's answer may take to reach this job (the scan job's transaction
    # interval and ours): a live deadline waits this long past the detectors' own deadline.
    evidence_grace_ms: int = moderation.EVIDENCE_GRACE_MS
    # The keyed operators: "batched" (BatchedVersions.java: order, state and timers in Java,
    # Python once per batch interval: modstream/jobs/moderation/batch.py; the default since
    # issue 26) or "pyflink" (EventTimeOrder.java, then `Moderate`, `RetroJoin`, `Sanctions` in
    # PyFlink).
    engine: str = ENGINE_BATCHED
    # The batched engine calls Python at most once per this much processing time for the
    # versions readied since its last call (BatchedVersions.java; 0: at every watermark that
    # readied one). It adds up to this to a decision's latency and divides the calls by the
    # watermarks in it (a live job's watermark interval is 50 ms, modstream/jobs/runtime.py).
    batch_interval_ms: int = 200
    # The batched engine holds input waiting for the watermark in memory (HeldInput.java, in
    # each checkpoint as raw keyed state) up to this many characters per keyed operator subtask
    # (keys, topics, values); past it, everything held moves to keyed state, as all held input
    # was kept before (a watermark held back by one partition must not exhaust the heap).
    held_input_max_chars: int = 32 << 20
    # The batched engine restoring a savepoint of the PyFlink engine that holds input in its
    # event-time order (RestoredOrder.java hands it on): set by `main` from the savepoint.
    restores_pyflink_order: bool = False
    # The version states each keyed operator instance keeps decoded after storing them, so a
    # version's next firing does not decode its state again (state_schema.DecodedStates; the
    # stored bytes stay the truth). 0: decode at every firing.
    state_cache_versions: int = STATE_CACHE_VERSIONS

    def clock(self) -> int:
        """The processing clock, in ms since the epoch."""
        return self.now_ms if self.now_ms is not None else runtime.wall_clock_ms()

    @classmethod
    def from_options(
        cls,
        options: object | Mapping[str, Any] | None,
        *,
        trusted_policy: dict[str, Any] | None,
        keyring: Keyring | None = None,
        policy_key_from_env: bool = True,
        topics: dict[str, str] | None = None,
        now_ms: int | None = None,
        wall_clock: bool = True,
        expected_lanes: tuple[str, ...] = (),
        end_offsets: tuple[str, str] = ("", ""),
        end_offsets_properties: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> ModerationConfig:
        """The one way the job, replay, the bench and its peer configure the moderation code.

        `options`: the job's parsed options (or a mapping) for the fields in OPTION_FIELDS; a
        field it lacks keeps its default. The limits always come from the environment (`env`,
        default os.environ); so does the keyring unless `keyring` is given (the job's, checked
        against its brokers), and the policy key (MODSTREAM_POLICY_KEY) unless
        `policy_key_from_env` is false (the bench and its peer trust their policy file alone).
        `now_ms` fixes the processing clock and `wall_clock=False` lets event time follow the
        input alone (replay); the lanes and where their ends are asked are the job's (its
        broker and consumer group)."""
        env = os.environ if env is None else env
        chosen = _option_fields(options)
        return cls(
            **chosen,
            limits=Limits.from_env(env),
            keyring=Keyring.from_env(env) if keyring is None else keyring,
            policy_key=env.get(POLICY_KEY_VARIABLE) if policy_key_from_env else None,
            trusted_policy=trusted_policy,
            topics=topics,
            now_ms=now_ms,
            wall_clock=wall_clock,
            expected_lanes=expected_lanes,
            end_offsets=end_offsets,
            end_offsets_properties=end_offsets_properties,
        )


def _option_fields(options: object | Mapping[str, Any] | None) -> dict[str, Any]:
    """The OPTION_FIELDS that `options` (a namespace or a mapping) sets."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return {name: options[name] for name in OPTION_FIELDS if name in options}
    return {name: getattr(options, name) for name in OPTION_FIELDS if hasattr(options, name)}
