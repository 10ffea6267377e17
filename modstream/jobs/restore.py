"""Where a job starts: its deployment's transactional ids, the checkpoint it restores, and no
second instance writing under the same ids (docs/RELIABILITY.md, "Exactly once").

A deployment is its checkpoint directory. Its transactional-id prefix and consumer group default
to `modstream-<job>-<8 hex of the directory's URI>`, so a staging or blue/green deployment on the
same brokers never fences another one, and the prefix is recorded in `modstream-job.json` in the
directory so every restart of the deployment uses the ids its checkpoints hold.

The Kafka sink names each checkpoint's transaction `<prefix>-<subtask>-<checkpoint id>` (the
connector's INCREMENTING strategy) and commits it once the checkpoint completes. A job that died
after the checkpoint completed and before the commit, and is restored after the broker aborted
the transaction (`transaction.timeout.ms`), would restore offsets past inputs whose outputs are
gone: the connector logs the failed commit and goes on. So a restore asks the broker for the
state of each retained checkpoint's transactions and starts from the newest checkpoint none of
whose transactions the broker aborted, marking the ones it passes over so no later restore takes
them. From the older checkpoint the lost epoch's inputs are read and decided again.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "modstream-job.json"
# Written into a checkpoint passed over because the broker aborted one of its transactions.
PASSED_OVER = "MODSTREAM_TRANSACTIONS_ABORTED"
# Broker states of a transaction whose records will never be committed.
ABORTED = frozenset({"PrepareAbort", "CompleteAbort", "PrepareEpochFence"})
# States a live writer moves its transactions into: a commit, or a new checkpoint's id.
COMMITTING = frozenset({"PrepareCommit", "CompleteCommit"})
# States of transactions a writer may still be using (worth watching for a live writer).
OPEN = frozenset({"Empty", "Ongoing", "PrepareCommit"})


class RestoreError(SystemExit):
    """The job cannot start as asked; the message says why and what to do."""


def deployment_id(checkpoint_dir: Path | str) -> str:
    """Eight hex digits naming a deployment by its checkpoint location (a path or a URI)."""
    uri = checkpoint_dir.resolve().as_uri() if isinstance(checkpoint_dir, Path) else checkpoint_dir
    return hashlib.sha256(uri.encode()).hexdigest()[:8]


def default_prefix(slug: str, checkpoint_dir: Path | str) -> str:
    return f"modstream-{slug}-{deployment_id(checkpoint_dir)}"


def completed_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Completed checkpoints (`<job id>/chk-N` with `_metadata`), newest first, without the ones
    passed over by an earlier restore."""
    found = [
        meta.parent
        for meta in checkpoint_dir.glob("*/chk-*/_metadata")
        if not (meta.parent / PASSED_OVER).exists()
    ]
    return sorted(found, key=lambda path: path.stat().st_mtime_ns, reverse=True)


def checkpoint_number(checkpoint: Path) -> int:
    return int(checkpoint.name.removeprefix("chk-"))


def epoch_ids(states: Mapping[str, str], prefix: str, number: int) -> dict[str, str]:
    """The transactions holding checkpoint `number`'s outputs, one per sink subtask."""
    pattern = re.compile(re.escape(prefix) + r"-\d+-" + str(number))
    return {tid: state for tid, state in states.items() if pattern.fullmatch(tid)}


def aborted_ids(states: Mapping[str, str], prefix: str, number: int) -> list[str]:
    return sorted(
        tid for tid, state in epoch_ids(states, prefix, number).items() if state in ABORTED
    )


@dataclass(frozen=True)
class Choice:
    checkpoint: Path | None
    passed_over: list[tuple[Path, list[str]]]


def choose(checkpoints: list[Path], states: Mapping[str, str], prefix: str) -> Choice:
    """The newest checkpoint whose transactions the broker did not abort (pure)."""
    passed: list[tuple[Path, list[str]]] = []
    for checkpoint in checkpoints:
        lost = aborted_ids(states, prefix, checkpoint_number(checkpoint))
        if not lost:
            return Choice(checkpoint, passed)
        passed.append((checkpoint, lost))
    return Choice(None, passed)


def advanced(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Transactions a live writer moved between two looks (pure): new ids (a new checkpoint's
    transaction) or commits. A crashed writer's transactions only time out into an abort."""
    return sorted(
        tid
        for tid, state in after.items()
        if tid not in before or (state in COMMITTING and before[tid] != state)
    )


def transaction_states(bootstrap_servers: str, prefix: str) -> dict[str, str]:
    """Every transactional id under `prefix` the brokers know, with its state."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    from modstream.core.config import kafka_options

    pattern = re.compile(re.escape(prefix) + r"-\d+-\d+")
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers, client_id="modstream-restore", **kafka_options()
        )
        try:
            listings = admin.list_transactions()
        finally:
            admin.close()
    except KafkaError as error:
        raise RestoreError(
            f"cannot ask the Kafka brokers at {bootstrap_servers} which transactions of"
            f" {prefix!r} are open or aborted ({type(error).__name__}); a job starts only once"
            " it knows what it may restore"
        ) from error
    return {
        listing.transactional_id: listing.state.value
        for per_broker in listings.values()
        for listing in per_broker
        if pattern.fullmatch(listing.transactional_id)
    }


def refuse_if_live(
    look: Callable[[], dict[str, str]],
    prefix: str,
    watch_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, str]:
    """Refuse to start while another instance writes under `prefix`: watch its transactions for
    `watch_s` (more than one checkpoint interval) when any may still be in use. Returns the
    states seen last."""
    before = look()
    if not any(state in OPEN for state in before.values()):
        return before
    sleep(watch_s)
    after = look()
    moved = advanced(before, after)
    if moved:
        raise RestoreError(
            f"another instance is writing with transactional id prefix {prefix!r} (its"
            f" transactions {', '.join(moved[:3])} moved within {watch_s:.0f} s): stop it"
            " first, or give this deployment its own --checkpoint-dir (or"
            " --transactional-id-prefix)"
        )
    return after


def read_marker(checkpoint_dir: Path) -> dict[str, Any]:
    path = checkpoint_dir / MARKER
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_marker(checkpoint_dir: Path, job: str, prefix: str, state_schema: int) -> None:
    record = {"job": job, "transactional_id_prefix": prefix, "state_schema": state_schema}
    (checkpoint_dir / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def check_schema(marker: Mapping[str, Any], job: str, state_schema: int) -> None:
    """Refuse a checkpoint directory whose state was written by a newer state schema."""
    written = int(marker.get("state_schema", 1))
    if written > state_schema:
        raise RestoreError(
            f"{job}: the checkpoints in this directory hold keyed state of schema {written};"
            f" this code reads up to schema {state_schema}. Restore with the code that wrote"
            " them (or a newer one), or start elsewhere with a new --checkpoint-dir"
        )


def resolve_remote(mode: str, location: str) -> str | None:
    """`--restore-from` when checkpoints go to a remote store (`s3://…`), which the job does not
    list: there the cluster restores (the Kubernetes operator's savepoints and HA, `flink run
    -s`, `modstream upgrade`), or the job is given a checkpoint or savepoint URI."""
    if mode in ("auto", "none"):
        return None
    if mode == "latest":
        raise RestoreError(
            f"--restore-from latest needs a checkpoint directory the job can list, not {location};"
            " give the checkpoint's URI, or let the cluster restore (docs/CONFIG.md)"
        )
    return mode


def resolve(
    mode: str,
    checkpoint_dir: Path,
    states: Mapping[str, str],
    prefix: str,
    say: Callable[[str], None] = print,
) -> str | None:
    """The checkpoint URI to restore for `--restore-from MODE` (auto, latest, none, or a path),
    marking checkpoints passed over."""
    if mode == "none":
        return None
    if mode not in ("auto", "latest"):
        return mode
    checkpoints = completed_checkpoints(checkpoint_dir)
    if not checkpoints:
        if mode == "latest":
            raise RestoreError(f"no completed checkpoint in {checkpoint_dir}")
        return None
    choice = choose(checkpoints, states, prefix)
    for checkpoint, lost in choice.passed_over:
        (checkpoint / PASSED_OVER).write_text("\n".join(lost) + "\n", encoding="utf-8")
        say(
            f"restore: passing over {checkpoint}: the broker aborted its transactions"
            f" {', '.join(lost)} (restored later than transaction.timeout.ms); its inputs are"
            " read again from the checkpoint before it"
        )
    if choice.checkpoint is None:
        raise RestoreError(
            f"every retained checkpoint in {checkpoint_dir} lost its outputs to aborted"
            " transactions; refusing to start on empty state. Start anyway with"
            " --restore-from none (state is rebuilt from what the sources still hold)"
        )
    return choice.checkpoint.resolve().as_uri()


def committed_partitions(bootstrap_servers: str, group_id: str, topics: list[str]) -> list[str]:
    """`topic#partition` of `topics` on which consumer group `group_id` has committed an offset
    (the Kafka source commits a completed checkpoint's offsets once its poll in flight returns,
    up to 10 s after the checkpoint)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    from modstream.core.config import kafka_options

    deadline = time.monotonic() + 30
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers, client_id="modstream-restore", **kafka_options()
        )
        try:
            while True:
                try:
                    offsets = admin.list_group_offsets({group_id: None}).get(group_id, {})
                    break
                except KafkaError as error:
                    # A new broker makes its offsets topic at the first group's lookup.
                    if not error.retriable or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            admin.close()
    except KafkaError as error:
        raise RestoreError(
            f"cannot ask the Kafka brokers at {bootstrap_servers} for the committed offsets of"
            f" consumer group {group_id!r} ({type(error).__name__}); a job starts only once it"
            " knows whether it would resume them without their state"
        ) from error
    wanted = set(topics)
    return sorted(
        f"{partition.topic}#{partition.partition}"
        for partition, committed in offsets.items()
        if partition.topic in wanted and committed.offset >= 0
    )


def empty_state_start(
    job: str,
    mode: str,
    restore_from: str | None,
    committed: list[str],
    group_id: str,
    *,
    accept_empty_state: bool,
    cluster_restores: bool,
) -> str | None:
    """Refuse to resume committed offsets with empty state (issue 27, point 8; pure): versions
    read but undecided would never be decided, reviews would go `stale`, strikes reset. Returns
    the line to log when the job starts on them anyway (named by the operator), else None."""
    if restore_from is not None or not committed:
        return None
    shown = ", ".join(committed[:4]) + (f" and {len(committed) - 4} more" if committed[4:] else "")
    if mode == "none" or cluster_restores:
        return (
            f"{job}: consumer group {group_id!r} has committed offsets ({shown}) and this job"
            " restores nothing itself: its state is the one the cluster restores"
            " (execution.state-recovery.path), or empty"
        )
    if accept_empty_state:
        return (
            f"{job}: starting with EMPTY state on the committed offsets of consumer group"
            f" {group_id!r} ({shown}) as --accept-empty-state says: versions read before are"
            " not decided again, reviews of them go `stale`, strikes start from zero"
        )
    raise RestoreError(
        f"{job}: consumer group {group_id!r} has committed offsets ({shown}) but there is no"
        " checkpoint to restore their state from: resuming them with empty state would never"
        " decide the versions read but undecided, send their reviews to `stale` and reset"
        " strikes. Start with --restore-from CHECKPOINT_OR_SAVEPOINT (the state those offsets"
        " belong to), or, accepting the empty state, with --accept-empty-state (logged)."
        " Rebuilding the state from moderation.index (--rebuild-from-index) is not available"
        " yet (issue 27)"
    )
