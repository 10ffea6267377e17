"""The promotion gate and the backtest, apart from their command line (modstream/cli/promote.py).

`promote`: a shadow or canary candidate's decisions (moderation.shadow) beside the active ones
(moderation.decisions) over a window of event time, read committed from a deployment's topics;
within the limit the candidate is activated through the one publishing path
(policy_service.publish: key, approvals, the job's own checks), past it only when forced with a
reason, which the activation record carries (signed with it, shown by `policy show --history`).
`backtest`: the same comparison on a history file, replayed under each policy
(modstream/ops/replay.py). The comparison itself is modstream/policy/compare.py.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from modstream.core.config import PROJECT_ROOT
from modstream.ops.policy_service import PolicyCliError, load_store, policy_key, publish
from modstream.policy.compare import Comparison, Latest, VersionKey, compare, facts_of, percent
from modstream.policy.store import PolicyStore

READ_BATCH = 1000  # records decoded (schema-checked) at a time
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


# The window.
def duration_ms(text: str) -> int:
    """`24h`, `90m`, `7d`, `30s` -> milliseconds; anything else is a ValueError that says so."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration: a number and a unit s, m, h or d (24h)")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


def iso_ms(text: str) -> int:
    """An ISO 8601 date or time (`2026-12-01`, `2026-12-01T08:00Z`; UTC unless it names an
    offset) -> ms since the epoch."""
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time (2026-12-01T08:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def iso(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# The candidate.
@dataclass(frozen=True)
class Candidate:
    """A policy version on policy.rules that is shadow or canary now."""

    policy_id: str
    version: int
    mode: str
    record: Mapping[str, Any]
    active: int | None


def candidate(store: PolicyStore, policy_id: str, version: int, topic: str) -> Candidate:
    """The candidate `version`, or a PolicyCliError saying why it cannot be promoted."""
    snapshot = store.snapshot(policy_id)
    if store.version(policy_id, version) is None or snapshot is None:
        raise PolicyCliError(f"{policy_id} v{version} is not on {topic}: nothing to promote")
    if snapshot.active == version:
        raise PolicyCliError(f"{policy_id} v{version} is already the active version")
    if version not in (snapshot.shadow, snapshot.canary):
        candidates = [f"shadow v{snapshot.shadow}"] if snapshot.shadow else []
        candidates += [f"canary v{snapshot.canary}"] if snapshot.canary else []
        raise PolicyCliError(
            f"{policy_id} v{version} is not a shadow or canary version now "
            f"(candidates: {', '.join(candidates) or 'none'}); only a candidate whose "
            f"decisions were recorded in shadow can be promoted"
        )
    mode = "shadow" if snapshot.shadow == version else "canary"
    record = next(r for r in reversed(store.records(policy_id)) if r.get("version") == version)
    return Candidate(policy_id, version, mode, record, snapshot.active)


def load_candidate(bootstrap: str, topic: str, policy_id: str, version: int) -> Candidate:
    store, _ = load_store(bootstrap, topic, policy_key())
    return candidate(store, policy_id, version, topic)


# Reading the deployment's topics.
def stream(bootstrap: str, topic: str) -> Iterator[dict[str, Any]]:
    """The valid records of `topic` to its end (read_committed), one batch decoded at a time;
    a warning on stderr counts the records skipped as malformed
    (modstream/contract/records.py `decode_values`)."""
    from modstream.contract.records import decode_values, schema_topic
    from modstream.core import kafkaio

    schema = schema_topic(topic)
    batch: list[Any] = []
    skipped = 0
    try:
        for message in kafkaio.iter_to_end(bootstrap, topic, committed=True):
            batch.append(message)
            if len(batch) >= READ_BATCH:
                values, bad = decode_values(batch, schema)
                skipped, batch = skipped + bad, []
                yield from values
    except LookupError as error:
        raise PolicyCliError(f"{error}: is the deployment (--prefix) right?") from None
    values, bad = decode_values(batch, schema)
    yield from values
    if skipped + bad:
        print(f"{topic}: skipped {skipped + bad} malformed record(s)", file=sys.stderr)


def compare_live(
    bootstrap: str, names: Mapping[str, str], chosen: Candidate, since: int
) -> Comparison:
    """The candidate's latest shadow decision per content version beside the latest active
    one (decisions made by the candidate itself, a canary's, are not the active side), for
    decisions whose `ts` is at or after `since`; facts from moderation.index."""
    active, shadow = Latest(since=since), Latest(since=since)
    for record in stream(bootstrap, names["moderation.decisions"]):
        if record["policy_id"] == chosen.policy_id and record["policy_version"] != chosen.version:
            active.add(record)
    for record in stream(bootstrap, names["moderation.shadow"]):
        if record["policy_id"] == chosen.policy_id and record["policy_version"] == chosen.version:
            shadow.add(record)
    wanted = set(active.by_version) | set(shadow.by_version)
    facts: dict[VersionKey, dict[str, str]] = {}
    for record in stream(bootstrap, names["moderation.index"]):
        found = facts_of(record)
        if found is not None and found[0] in wanted:
            facts[found[0]] = found[1]
    return compare(active.by_version, shadow.by_version, facts)


# The gate.
def gate(
    comparison: Comparison,
    chosen: Candidate,
    max_changed: Fraction,
    *,
    since: int,
    force: bool,
    reason: str | None,
) -> bool:
    """Whether the promotion goes ahead forced (True) or within the limit (False); a
    PolicyCliError naming the fraction and the limit when it is refused."""
    if force and not (reason and reason.strip()):
        raise PolicyCliError("--force needs --reason TEXT: why, recorded with the activation")
    name = f"{chosen.policy_id} v{chosen.version}"
    if comparison.within(max_changed):
        return False
    if comparison.compared == 0:
        what = (
            f"no content version decided by both the active policy and {name}"
            if comparison.candidate_only
            else f"no {chosen.mode} decision of {name}"
        )
        refusal = f"{what} since {iso(since)}: nothing to compare (widen --window or --since)"
    else:
        refusal = (
            f"{name} changes {comparison.changed} of {comparison.compared} outcomes "
            f"({percent(comparison.fraction)}), above the limit {percent(max_changed)}"
        )
    if force:
        return True
    raise PolicyCliError(f"refused: {refusal}; `--force --reason TEXT` promotes anyway (recorded)")


def promotion_field(
    comparison: Comparison,
    chosen: Candidate,
    max_changed: Fraction,
    *,
    since: int,
    by: str,
    forced: bool,
    reason: str | None,
) -> dict[str, Any]:
    """What the activation record carries about its gate (field `promotion`)."""
    from modstream.policy.compare import summary

    out: dict[str, Any] = {
        "from_mode": chosen.mode,
        "by": by,
        "window_since": since,
        **summary(comparison, max_changed),
        "forced": forced,
    }
    if reason:
        out["reason"] = reason.strip()
    return out


def activate(
    bootstrap: str,
    topic: str,
    chosen: Candidate,
    promotion: Mapping[str, Any],
    *,
    approvals_dir: Path,
    require_approval: bool,
) -> tuple[dict[str, Any], PolicyStore]:
    """The candidate's own document as the active version (author and author's signature: the
    candidate's), through policy_service.publish; `promotion` is signed there with the key of
    its `by`, the promoter (modstream/trust/two_person.py)."""
    authorship = chosen.record.get("authorship")
    record, after = publish(
        bootstrap,
        topic,
        dict(chosen.record["document"]),
        mode="active",
        author=str(chosen.record.get("author") or "unknown"),
        ts=int(time.time() * 1000),
        approvals_dir=approvals_dir,
        require_approval=require_approval,
        activation_fields=promotion,
        signed_authorship=authorship if isinstance(authorship, Mapping) else None,
        promoting=True,
    )
    return record, after


# The backtest.
@dataclass(frozen=True)
class Backtest:
    comparison: Comparison
    seconds: dict[str, float]  # replay of each policy
    dlq: dict[str, dict[str, int]]  # per policy: DLQ records by error class


def backtest(old: Path, new: Path, events: Path, out: Path | None = None) -> Backtest:
    """Replay `events` under `old` then `new` (each trusted, as `modstream replay --policy`)
    and compare the final decisions; the runs' outputs go to out/old and out/new."""
    from modstream.ops import replay

    root = out or Path(tempfile.mkdtemp(prefix="modstream-backtest-"))
    seconds: dict[str, float] = {}
    latest: dict[str, Latest] = {}
    dlq: dict[str, dict[str, int]] = {}
    for side, policy in (("old", old), ("new", new)):
        started = time.monotonic()
        replay.run(events, policy, root / side)
        seconds[side] = round(time.monotonic() - started, 1)
        latest[side] = Latest().extend(_jsonl(root / side / "moderation.decisions.jsonl"))
        dlq[side] = _classes(_jsonl(root / side / "moderation.dlq.jsonl"))
    facts = dict(
        found
        for line in _jsonl(events)
        if line.get("topic") == "content.versions" and isinstance(line.get("value"), dict)
        if (found := facts_of(line["value"])) is not None
    )
    comparison = compare(latest["old"].by_version, latest["new"].by_version, facts)
    return Backtest(comparison, seconds, dlq)


# The sample that ships: deploy/demo/backtest-events.jsonl, from the workload generator
# (modstream/demo/backtest_sample.py writes it).
SAMPLE_EVENTS = PROJECT_ROOT / "deploy" / "demo" / "backtest-events.jsonl"
SAMPLE_CANDIDATE = PROJECT_ROOT / "policy_rules" / "examples" / "global-nsfw-0.8.yaml"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    import json

    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                raise PolicyCliError(f"{path}:{number}: not a JSON line") from None
            if isinstance(value, dict):
                yield value


def _classes(records: Iterator[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        name = str(record.get("error_class"))
        counts[name] = counts.get(name, 0) + 1
    return counts
