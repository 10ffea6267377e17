"""The pure parts of the fault-injection harness (tests/faults/harness.py, `make test-faults`):
the record checks, functions over what the live run committed, what `modstream replay` made of
the same input, and what the Content Service serves; and `merge`, how the harness mixes extra
lines into the generated workload.

Every check returns the offending records (keys), never just a count, so a failure names what
was lost or duplicated. The replay is the oracle: the same input, no faults, deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from modstream.moderation.step import VISIBILITY

Record = dict[str, Any]
Line = dict[str, Any]  # a workload line: {"topic": ..., "value": ...}
Version = tuple[str, int]
Revision = tuple[str, int, int]
# What a final decision is compared on. Not its revision number: live, a deadline reached while
# the job catches up waits for the detectors' real time (docs/moderation.md, "Time"), so after a
# fault a version can take another path to the same end than replay, which never waits. A lost
# record shows as a gap in the live revisions instead (`revision_gaps`).
DECIDED = ("outcome", "restriction", "state", "policy_version")


def revision_key(record: Record) -> Revision:
    return (record["content_id"], record["content_version"], record["decision_revision"])


def duplicates(records: Iterable[Record], key: Any = revision_key) -> list[Any]:
    """Keys seen more than once (each once per extra copy): what exactly-once forbids."""
    counts = Counter(key(record) for record in records)
    return sorted(k for k, n in counts.items() for _ in range(n - 1))


def final_decisions(
    decisions: Iterable[Record], cutoff_ts: int | None = None
) -> dict[Version, Record]:
    """Each version's highest revision, among the decisions stamped at or before cutoff_ts
    (a replay runs every version to the end of time; the live run stops at its end marker)."""
    latest: dict[Version, Record] = {}
    for decision in decisions:
        if cutoff_ts is not None and decision["ts"] > cutoff_ts:
            continue
        version = (decision["content_id"], decision["content_version"])
        if (
            version not in latest
            or decision["decision_revision"] > latest[version]["decision_revision"]
        ):
            latest[version] = decision
    return latest


def decision_mismatches(
    live: dict[Version, Record],
    replayed: dict[Version, Record],
    later: Mapping[Version, list[Record]] | None = None,
) -> list[tuple[Version, dict[str, Any] | None, dict[str, Any] | None]]:
    """Versions whose final decision differs from replay's (or exists on one side only).

    `later`: replay's decisions stamped after the cutoff. Live, a deadline reached while the
    job catches up waits for the detectors' real time and keeps its own `ts`; when event time
    has meanwhile passed a later step (a provisional expiry), it decides straight to where
    replay arrives only later. So a live final decision may equal a later replay decision."""
    out = []
    for version in sorted(set(live) | set(replayed)):
        ours = {k: live[version].get(k) for k in DECIDED} if version in live else None
        theirs = {k: replayed[version].get(k) for k in DECIDED} if version in replayed else None
        ahead = [{k: d.get(k) for k in DECIDED} for d in (later or {}).get(version, [])]
        if ours != theirs and ours not in ahead:
            out.append((version, ours, theirs))
    return out


def after_cutoff(decisions: Iterable[Record], cutoff_ts: int) -> dict[Version, list[Record]]:
    later: dict[Version, list[Record]] = {}
    for decision in decisions:
        if decision["ts"] > cutoff_ts:
            version = (decision["content_id"], decision["content_version"])
            later.setdefault(version, []).append(decision)
    return later


def visibility_of(decision: Record) -> str:
    return "hidden" if decision["state"] == "deleted" else VISIBILITY[decision["outcome"]]


def revisions_needing_actions(decisions: Iterable[Record]) -> set[Revision]:
    """The revisions that change what the Content Service must apply (the first, or a new
    visibility or restriction): each must have its moderation.actions record."""
    by_version: dict[Version, list[Record]] = {}
    for decision in decisions:
        by_version.setdefault((decision["content_id"], decision["content_version"]), []).append(
            decision
        )
    needed: set[Revision] = set()
    for revisions in by_version.values():
        previous: Record | None = None
        for decision in sorted(revisions, key=lambda d: d["decision_revision"]):
            if previous is None or (visibility_of(previous), previous.get("restriction")) != (
                visibility_of(decision),
                decision.get("restriction"),
            ):
                needed.add(revision_key(decision))
            previous = decision
    return needed


def revision_gaps(decisions: Iterable[Record]) -> list[Revision]:
    """Revisions a version's decisions skip: the job numbers each version's decisions 1, 2, ...
    as it makes them, so a gap is a decision it made whose record was lost (a transaction
    aborted after its state moved on)."""
    seen: dict[Version, set[int]] = {}
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        seen.setdefault(version, set()).add(decision["decision_revision"])
    return sorted(
        (*version, number)
        for version, numbers in seen.items()
        for number in range(1, max(numbers) + 1)
        if number not in numbers
    )


def missing_keys(expected: Iterable[Any], seen: Iterable[Any]) -> list[Any]:
    return sorted(set(expected) - set(seen))


@dataclass
class Findings:
    """What the checks found, by kind; each list names the records."""

    duplicates: dict[str, list[Any]] = field(default_factory=dict)
    missing: dict[str, list[Any]] = field(default_factory=dict)
    discrepancies: dict[str, list[Any]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {
            "duplicates": sum(len(v) for v in self.duplicates.values()),
            "missing": sum(len(v) for v in self.missing.values()),
            "discrepancies": sum(len(v) for v in self.discrepancies.values()),
        }

    def samples(self, limit: int = 5) -> dict[str, dict[str, list[Any]]]:
        """A few offending keys of every non-empty finding, for the report."""
        return {
            kind: {name: items[:limit] for name, items in book.items() if items}
            for kind, book in (
                ("duplicates", self.duplicates),
                ("missing", self.missing),
                ("discrepancies", self.discrepancies),
            )
        }


def check(
    live: Mapping[str, list[Record]],
    replayed: Mapping[str, list[Record]],
    served: Mapping[str, tuple[str | None, bool | None]],
    cutoff_ts: int,
    ignore: frozenset[str] = frozenset(),
) -> Findings:
    """Every check of issue 13 over one run.

    live / replayed: committed records by contract topic (decisions, actions, notifications,
    account actions). served: per content id, (the Content Service's effective visibility, whether
    the current version's media is in the public directory). Records of content ids in `ignore`
    (the harness's clock markers) are left out. Replay's decisions stamped after cutoff_ts are
    not its final one, but a live final decision may equal one of them.
    """

    def mine(records: list[Record]) -> list[Record]:
        return [r for r in records if r["content_id"] not in ignore]

    decisions = mine(live.get("moderation.decisions", []))
    actions = mine(live.get("moderation.actions", []))
    notices = mine(live.get("user.notifications", []))
    sanctions = mine(live.get("account.actions", []))
    found = Findings()
    found.duplicates = {
        "decisions": duplicates(decisions),
        "actions": duplicates(actions),
        "notifications": duplicates(notices, key=lambda r: r["notification_id"]),
        "account_actions": duplicates(sanctions, key=lambda r: r["action_id"]),
    }
    replayed_all = mine(replayed.get("moderation.decisions", []))
    replay_in_cut = [d for d in replayed_all if d["ts"] <= cutoff_ts]
    found.missing = {
        "revision_gaps": revision_gaps(decisions),
        "actions_of_visibility_changes": missing_keys(
            revisions_needing_actions(decisions), map(revision_key, actions)
        ),
        "versions_decided_by_replay": missing_keys(
            final_decisions(replay_in_cut), final_decisions(decisions)
        ),
    }
    # Live's last decision whenever stamped: a waiting deadline or a provisional expiry looked at
    # again once live may be stamped after the cutoff, where replay's matching one is too.
    final = final_decisions(decisions)
    found.discrepancies = {
        "final_decision_vs_replay": decision_mismatches(
            final, final_decisions(replay_in_cut), after_cutoff(replayed_all, cutoff_ts)
        ),
        "served_vs_decided": served_mismatches(final_decisions(decisions), served),
    }
    return found


def served_mismatches(
    final: dict[Version, Record], served: Mapping[str, tuple[str | None, bool | None]]
) -> list[tuple[str, str, str | None, bool | None]]:
    """Items where Redis's effective visibility or the public directory disagrees with the
    final decision of the item's current (highest) version: (content id, decided, effective,
    exported)."""
    current: dict[str, Record] = {}
    for (content_id, version), decision in final.items():
        if content_id not in current or version > current[content_id]["content_version"]:
            current[content_id] = decision
    out = []
    for content_id, decision in sorted(current.items()):
        desired = visibility_of(decision)
        effective, exported = served.get(content_id, (None, None))
        if effective != desired or exported is not (desired in ("public", "limited")):
            out.append((content_id, desired, effective, exported))
    return out


def merge(lines: list[Line], extra: list[Line]) -> list[Line]:
    """`extra` merged into `lines` by ts, keeping `lines`' own order (early evidence stays right
    after its upload): each line is placed by the newest ts before it."""

    def ts(line: Line) -> int:
        value = line["value"]
        return value["ts"] if isinstance(value, dict) and isinstance(value.get("ts"), int) else 0

    extra = sorted(extra, key=ts)
    out: list[Line] = []
    newest = 0
    position = 0
    for line in lines:
        newest = max(newest, ts(line))
        while position < len(extra) and ts(extra[position]) <= newest:
            out.append(extra[position])
            position += 1
        out.append(line)
    return out + extra[position:]
