"""What a `modstream demo` run produced, read back, and the summary printed from it.

This run's records of each topic (its run id is in every one of them), the visibility the
Content Service serves against the final decisions once the reconciler's SLA has passed, the
decision-to-enforcement lag as a reader sees it, and the detector calls cost ordering saved.
`--json` prints the summary as one line.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections import Counter
from typing import Any

from modstream.analytics import cost, quality
from modstream.contract.records import decode_values, schema_topic
from modstream.core import kafkaio
from modstream.core.config import Settings
from modstream.demo import checks as demo_checks
from modstream.enforcement.content_service import ContentService
from modstream.moderation.step import VISIBILITY
from modstream.review import agreement
from modstream.scanning import drift

DONE = (b"COMPLETED", b"STALE")  # intents the Action Service has finished


def mine(settings: Settings, topic: str, run_id: str) -> list[dict[str, Any]]:
    """This run's valid records of `topic`; a malformed one is skipped with a warning."""
    records = [
        r
        for r in kafkaio.read_to_end(settings.bootstrap_servers, topic)
        if r.value is not None and run_id in r.value.decode("utf-8", errors="replace")
    ]
    values, skipped = decode_values(records, schema_topic(topic))
    if skipped:
        print(f"demo: {topic}: skipped {skipped} malformed record(s)", file=sys.stderr)
    return values


def scan_calls_saved(
    settings: Settings,
    names: dict[str, str],
    run_id: str,
    lines: list[dict[str, Any]],
    decided: set[tuple[str, int]],
    policy_document: dict[str, Any],
) -> dict[str, int]:
    """Detector calls cost ordering saved (modstream/scanning/plan.py: calls_saved): the required
    (detector, segment) pairs of the decided uploads that got neither a scan request nor a
    result, split into model calls and gate-check calls."""
    from modstream.policy.evaluate import load_policy
    from modstream.scanning import plan as scan_plan

    uploads = [
        line["value"]
        for line in lines
        if line["topic"] == "content.versions"
        and isinstance(line["value"], dict)
        and line["value"].get("type") == "upsert"
        and (line["value"].get("content_id"), line["value"].get("content_version")) in decided
    ]
    asked: set[tuple[str, int, str, int]] = set()
    sources = [names[f"scan.requests.{m}"] for m in ("text", "image", "video", "audio")]
    for topic in [*sources, names["detector.results"]]:
        for record in mine(settings, topic, run_id):
            segment = record.get("segment_id") or 0
            asked.add(
                (record["content_id"], record["content_version"], record["detector"], segment)
            )
    return scan_plan.calls_saved(uploads, load_policy(policy_document), asked)


class LagWatch(threading.Thread):
    """Decision-to-enforcement lag as a reader sees it: from the moment an action is readable
    (committed) on moderation.actions to the moment content.visibility shows its revision."""

    def __init__(self, settings: Settings, run_id: str, names: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.run_id = run_id
        self.names = names
        self.seen_action: dict[tuple[str, int, int], float] = {}
        self.seen_visible: dict[tuple[str, int, int], float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            self.names["moderation.actions"],
            self.names["content.visibility"],
            bootstrap_servers=self.settings.bootstrap_servers,
            isolation_level="read_committed",
            auto_offset_reset="latest",
            enable_auto_commit=False,
            group_id=None,
            **self.settings.kafka.python_options(),
        )
        try:
            while not self.stopping.is_set():
                for partition, records in consumer.poll(timeout_ms=200).items():
                    self._note(partition.topic, records, time.monotonic())
        finally:
            consumer.close()

    def _note(self, topic: str, records: list[Any], now: float) -> None:
        """When each of this run's revisions was first seen on `topic` (malformed: skipped)."""
        mine = [
            r
            for r in records
            if r.value is not None and self.run_id in r.value.decode("utf-8", errors="replace")
        ]
        schema = schema_topic(topic)
        for value in decode_values(mine, schema)[0]:
            key = (value["content_id"], value["content_version"], value["decision_revision"])
            book = (
                self.seen_action if topic == self.names["moderation.actions"] else self.seen_visible
            )
            book.setdefault(key, now)

    def lags_ms(self) -> list[float]:
        return sorted(
            max(0.0, (self.seen_visible[key] - at) * 1000)
            for key, at in self.seen_action.items()
            if key in self.seen_visible
        )


def percentile(values: list[float], fraction: float) -> int:
    if not values:
        return 0
    return int(values[min(len(values) - 1, int(fraction * len(values)))])


@dataclasses.dataclass(frozen=True)
class Results:
    """This run's records of each output topic and what was checked against them."""

    decisions: list[dict[str, Any]]  # every revision, the end markers' left out
    latest: dict[tuple[str, int], dict[str, Any]]  # each version's highest revision
    actions: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    shadows: list[dict[str, Any]]
    letters: list[dict[str, Any]]
    discrepancies: list[dict[str, Any]]
    sanctions: list[dict[str, Any]]
    notices: list[dict[str, Any]]
    saved: dict[str, int]  # scan_calls_saved
    mismatched: set[str]  # content ids whose served visibility is not the final decision's
    overdue: list[tuple[str, int]]  # versions still `scanning` long after their deadline
    applied: int  # actions the Action Service finished
    lags: list[float]  # LagWatch.lags_ms
    exposures: list[dict[str, Any]]  # enforcement.exposure: the reconciler's exposure windows
    # Quality of decisions, review wait, cost per decision (issue 29, items 3 and 5):
    # review.decisions of this run, and when each review task was written to review.tasks
    # (Kafka timestamp, ms).
    reviews: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tasks_written: dict[str, int] = dataclasses.field(default_factory=dict)
    collected_at: int = 0  # wall clock (ms) when the outputs were read back
    # Score drift and cost per decision (issue 29 items 4 and 5): this run's detector.results.
    evidence: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    read_media: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # issue 28 item 8


def collect(
    settings: Settings,
    names: dict[str, str],
    run_id: str,
    *,
    marker: str,
    lines: list[dict[str, Any]],
    policy: dict[str, Any],
    service: ContentService,
    client: Any,
    watch: LagWatch,
    live: bool,
) -> Results:
    """Read this run's outputs back and check the served visibility against them. `live`: the
    records were sent at the pace of their event time (`--detectors real`), so every deadline
    must have been decided; the generated workload is a backlog ten minutes behind the clock,
    whose reached deadlines wait for live event time by design (docs/moderation.md, "Time",
    rule 3), so a version of it may still be `scanning` at the end without anything wrong."""
    everything = mine(settings, names["moderation.decisions"], run_id)
    decisions = [d for d in everything if not d["content_id"].startswith(marker)]
    actions = mine(settings, names["moderation.actions"], run_id)
    tasks = mine(settings, names["review.tasks"], run_id)
    shadows = mine(settings, names["moderation.shadow"], run_id)
    letters = mine(settings, names["moderation.dlq"], run_id)
    discrepancies = mine(settings, names["moderation.discrepancies"], run_id)
    sanctions = mine(settings, names["account.actions"], run_id)
    notices = mine(settings, names["user.notifications"], run_id)
    exposures = mine(settings, names["enforcement.exposure"], run_id)
    reviews = mine(settings, names["review.decisions"], run_id)
    tasks_written = quality.written_at(settings, names["review.tasks"], run_id)
    decided = {(d["content_id"], d["content_version"]) for d in decisions}
    saved = scan_calls_saved(settings, names, run_id, lines, decided, policy)
    latest = _latest_revisions(decisions)
    mismatched = _visibility_mismatches(service, _final_decisions(latest))
    reached = max((d["ts"] for d in everything), default=0)  # the end markers' included
    applied = sum(1 for a in actions if client.get(f"intent:{a['action_id']}") in DONE)
    return Results(
        decisions=decisions,
        latest=latest,
        actions=actions,
        tasks=tasks,
        shadows=shadows,
        letters=letters,
        discrepancies=discrepancies,
        sanctions=sanctions,
        notices=notices,
        saved=saved,
        mismatched=mismatched,
        overdue=demo_checks.overdue(latest, lines, policy, reached) if live else [],
        applied=applied,
        lags=watch.lags_ms(),
        exposures=exposures,
        reviews=reviews,
        tasks_written=tasks_written,
        collected_at=int(time.time() * 1000),
        evidence=mine(settings, names["detector.results"], run_id),
        read_media=demo_checks.read_media(latest, lines) if live else [],
    )


def _latest_revisions(decisions: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for decision in decisions:
        version = (decision["content_id"], decision["content_version"])
        if (
            version not in latest
            or decision["decision_revision"] > latest[version]["decision_revision"]
        ):
            latest[version] = decision
    return latest


def _final_decisions(
    latest: dict[tuple[str, int], dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """What users should see: the current (highest) version's final decision, per content."""
    final: dict[str, dict[str, Any]] = {}
    for (content_id, content_version), decision in latest.items():
        if content_id not in final or content_version > final[content_id]["content_version"]:
            final[content_id] = decision
    return final


def _visibility_mismatches(service: ContentService, final: dict[str, dict[str, Any]]) -> set[str]:
    mismatched = set()
    for content_id, decision in final.items():
        desired = "hidden" if decision["state"] == "deleted" else VISIBILITY[decision["outcome"]]
        effective = service.effective(content_id, int(time.time() * 1000))
        if effective is None or effective.visibility != desired:
            mismatched.add(content_id)
    return mismatched


def summarize(results: Results, started: float) -> dict[str, Any]:
    """The summary `--json` prints; `started` is the run's time.monotonic() at its start."""
    revisions = Counter(
        (d["content_id"], d["content_version"], d["decision_revision"]) for d in results.decisions
    )
    lags = results.lags
    lag_summary = {
        "p50": percentile(lags, 0.50),
        "p99": percentile(lags, 0.99),
        "measured": len(lags),
    }
    mismatched = results.mismatched
    return {
        "content_versions": len(results.latest),
        "decisions": len(results.decisions),
        "actions": len(results.actions),
        "applied": results.applied,
        "visibility_mismatches": len(mismatched),
        "overdue_scanning": len(results.overdue),
        "discrepancies_open": len({d["content_id"] for d in results.discrepancies} & mismatched),
        "discrepancies_seen": len(results.discrepancies),
        "dlq": len(results.letters),
        "review_tasks": len(results.tasks),
        "shadow_decisions": len(results.shadows),
        "account_actions": len(results.sanctions),
        "notifications": len(results.notices),
        "scan_calls_saved": results.saved,
        "duplicate_revisions": sum(n - 1 for n in revisions.values()),
        "enforcement_lag_ms": lag_summary,
        "exposure_ms": exposure_summary(results.exposures),
        "quality": quality.quality_summary(results.decisions, results.notices, results.tasks),
        "review_wait": quality.review_wait_summary(
            results.tasks, results.reviews, results.tasks_written, results.collected_at
        ),
        "second_reviews": agreement.second_review_summary(results.tasks, results.reviews),
        "score_drift": drift_summary(results.evidence),
        "cost_per_decision": cost_summary(results),
        "results_by_detector": demo_checks.results_by_detector(results.evidence),
        "read_media": results.read_media,
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def exposure_summary(exposures: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 and p99 of the exposure windows (one per version: a record seen twice counts once),
    how many were measured, and how many by trigger."""
    windows = {(e["content_id"], e["content_version"]): e for e in exposures}
    values = sorted(float(e["exposure_ms"]) for e in windows.values())
    return {
        "p50": percentile(values, 0.50),
        "p99": percentile(values, 0.99),
        "measured": len(values),
        "by_trigger": dict(sorted(Counter(e["trigger"] for e in windows.values()).items())),
    }


def drift_summary(evidence: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """PSI of each detector's scores ("detector label model_version"): the run's last window
    against the windows before it (modstream/scanning/drift.py `drift_points`: a run is a young
    archive, cut in four windows), with the PSI chance alone gives at its counts (`noise`: a demo's
    few dozen scores a window give PSI well above 0.2 by chance); series with too few scores are
    left out."""
    latest: dict[str, dict[str, float]] = {}
    for point in drift.drift_points(evidence):  # in time order per series
        latest[f"{point.detector} {point.label} {point.model_version}"] = {
            "psi": round(point.psi, 4),
            "noise": round(point.noise, 4),
            "scores": point.results,
        }
    return dict(sorted(latest.items()))


def cost_summary(results: Results) -> list[dict[str, Any]]:
    """Cost per decision by policy and workflow version (modstream/analytics/cost.py)."""
    found = cost.cost_per_decision(
        results.decisions, results.evidence, results.tasks, results.reviews
    )
    return [{**dataclasses.asdict(row), "per_decision": row.per_decision()} for row in found]


def succeeded(results: Results, summary: dict[str, Any]) -> bool:
    """Something was decided, no revision twice, every action enforced, nothing mismatched,
    no version left `scanning` long past its deadline (neither its evidence nor its deadline
    decided it: demo_checks.overdue), every real media kind decided as labelled (`read_media`)."""
    return (
        bool(results.latest)
        and summary["duplicate_revisions"] == 0
        and results.applied == len(results.actions)
        and not results.mismatched
        and not results.overdue
        and all(read["ok"] for read in results.read_media)
    )


def _first(versions: list[tuple[str, int]], shown: int = 3) -> str:
    """A few of `versions`, for a summary row."""
    if not versions:
        return ""
    names = ", ".join(f"{content_id} v{version}" for content_id, version in versions[:shown])
    return f" ({names}{', …' if len(versions) > shown else ''})"


def _row(title: str, counts: Counter[str]) -> None:
    print(f"  {title:<28} " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))


def _print_drift_and_cost(summary: dict[str, Any]) -> None:
    """Score drift per detector and cost per decision per workflow version (issue 29)."""
    drifted = summary["score_drift"]
    print(
        "  score drift (PSI, last window) "
        + (
            ", ".join(
                f"{name} {d['psi']:.3f} (chance {d['noise']:.3f})" for name, d in drifted.items()
            )
            or "too few scores"
        )
    )
    for row in summary["cost_per_decision"]:
        each = row["per_decision"]
        print(
            f"  cost per decision (policy v{row['policy_version']}, workflow "
            f"v{row['workflow_version'] or '-'}) {row['decisions']} decisions: "
            f"{each['detector_calls']} detector calls, {each['inference_ms']} inference ms, "
            f"{each['review_minutes']} review minutes, {each['reevaluations']} re-evaluations"
        )


def print_summary(
    results: Results,
    summary: dict[str, Any],
    *,
    run_id: str,
    seed: int,
    shadow_version: int,
    retro_bank: dict[str, Any] | None,
    started: float,
) -> None:
    """The human-readable summary, one line or row per figure."""
    latest, decisions, actions = results.latest, results.decisions, results.actions
    lag_summary, saved = summary["enforcement_lag_ms"], results.saved
    print()
    print(f"modstream demo summary (run {run_id[:-1]}, seed {seed})")
    print(f"  content versions decided      {len(latest)}")
    print(f"  decision revisions            {len(decisions)}")
    _row("latest outcome", Counter(d["outcome"] for d in latest.values()))
    _row("latest state", Counter(d["state"] for d in latest.values()))
    _row("revisions by trigger", Counter(d["trigger"] for d in decisions))
    _row("actions by visibility", Counter(a["visibility"] for a in actions))
    bank_ts = {retro_bank["value"]["ts"]} if retro_bank is not None else set()
    retroactive = [d for d in decisions if d["trigger"] == "policy_change" and d["ts"] in bank_ts]
    print(f"  retroactive (bank addition)   {len(retroactive)} decision(s), policy_change")
    print(f"  actions enforced              {results.applied} of {len(actions)}")
    print(f"  visibility mismatches         {len(results.mismatched)} (after the reconciler's SLA)")
    print(f"  still scanning past deadline  {len(results.overdue)}" + _first(results.overdue))
    print(
        f"  discrepancies seen / open     {len(results.discrepancies)} / "
        f"{summary['discrepancies_open']}"
    )
    print(
        f"  enforcement lag               p50 {lag_summary['p50']} ms, "
        f"p99 {lag_summary['p99']} ms ({len(results.lags)} actions)"
    )
    exposure = summary["exposure_ms"]
    print(
        f"  exposure window               p50 {exposure['p50']} ms, p99 {exposure['p99']} ms "
        f"({exposure['measured']} versions shown, then restricted)"
    )
    _print_drift_and_cost(summary)
    _row("review tasks by queue", Counter(f"{t['kind']}:{t['queue']}" for t in results.tasks))
    for line in quality.summary_lines(summary):
        print(line)
    print(f"  shadow decisions (policy v{shadow_version})   {len(results.shadows)}")
    _row("account actions", Counter(s["sanction"] for s in results.sanctions))
    print(f"  notifications                 {len(results.notices)}")
    print(
        f"  model calls saved             {saved['models']} by cost order (+ {saved['checks']} "
        f"checks; {saved['required']} calls with every required detector asked)"
    )
    _row("dead letters by class", Counter(letter["error_class"] for letter in results.letters))
    print("\n".join(demo_checks.read_media_lines(summary)))  # results per detector, media read
    print(
        f"  duplicate revisions seen by a read_committed consumer: {summary['duplicate_revisions']}"
    )
    print(
        f"  elapsed {time.monotonic() - started:.1f}s; the stack is still up (`make down` stops it)"
    )
