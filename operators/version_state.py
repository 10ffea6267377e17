"""One content version's state document, what the moderation step is given and returns, and the
moderation job's topics and time bounds.

A leaf module: every part of the step (operators/moderation.py, handlers.py, verdict.py,
decide.py, records.py, timers.py) imports its types and constants from here, never from each
other in a ring. operators/moderation.py re-exports them for the job and its tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modstream.limits import Limits
from operators.policy_store import Resolution
from operators.reports import ReportWeight

if TYPE_CHECKING:
    from operators.review_access import ReviewGrants

# The moderation job's topics (contract names).
KEYED_TOPICS = (
    "content.versions",
    "detector.results",
    "moderation.reports",
    "review.decisions",
    "moderation.appeals",
    "moderation.reevaluate",
    "review.leases",  # modstream's own (schemas/review.py)
)
BROADCAST_TOPICS = ("policy.rules", "hash.bank", "review.grants")
OUTPUT_TOPICS = (
    "moderation.decisions",
    "moderation.actions",
    "review.tasks",
    "moderation.shadow",
    "moderation.dlq",
    "account.actions",
    "user.notifications",
    "scan.requests.text",
    "scan.requests.image",
    "scan.requests.video",
    "scan.requests.audio",
    "moderation.index",
)
# Internal: a decision that may add or reverse a strike, on its way to the author-keyed
# sanctions operator (operators/sanctions.py); never written to Kafka.
SANCTIONS = "_sanctions"
# Internal: a bank addition reaching a version decided before it (operators/retro.py, keyed to
# the version at the addition's ts); never written to Kafka.
RETRO = "moderation.retro"
ALL_TOPICS = (*KEYED_TOPICS, *BROADCAST_TOPICS, *OUTPUT_TOPICS)
# Human input: applies to a version decided at any time in the past (contract v1.1).
HUMAN_TOPICS = ("review.decisions", "moderation.appeals")
# A reviewer's claim of a task (operators/review_access.py): like human input, it applies to a
# version decided at any time in the past, and to nothing else.
LEASE_TOPIC = "review.leases"
# How many digests of applied human inputs a version keeps (operators/human.py): far more reviews
# and appeals than one version sees; past it the oldest go, and the newest-`ts` rule still holds.
HUMAN_IDS_KEPT = 64

# How long a decided version keeps its state for review, appeal and re-evaluation, and how long
# a deleted version (or evidence whose upsert never came) is remembered. docs/moderation.md.
STATE_TTL_MS = 30 * 86_400_000
# After STATE_TTL_MS a decided version is retired to a compact record (`timers.retire`) that
# keeps its right to be reviewed and appealed (contract v1.1) this long after its last input.
REVIEW_RETENTION_MS = 400 * 86_400_000
# Live deployments' defaults (docs/moderation.md, "Time"): a deadline reached more than
# LIVE_WINDOW_MS behind the processing clock was reached while catching up; a detector's answer
# reaches the job within EVIDENCE_GRACE_MS (the scan job's transaction interval and the job's).
LIVE_WINDOW_MS = 30_000
EVIDENCE_GRACE_MS = 5_000
TOMBSTONE_TTL_MS = 86_400_000
ORPHAN_TTL_MS = 86_400_000
DEFAULT_LIMITS = Limits()


Output = tuple[str, str, dict[str, Any]]  # (contract topic, Kafka key, record)
State = dict[str, Any]


@dataclass(frozen=True)
class Context:
    """What the adapter knows at the event's time: policies, the content's bank matches, and
    for a report its weight from the reporter-side gate (operators/reports.py), and the
    deployment's bounds on one version's state (modstream/limits.py)."""

    resolution: Resolution
    hash_matches: frozenset[str] = frozenset()
    report: ReportWeight | None = None
    limits: Limits = DEFAULT_LIMITS
    # The processing clock when event time follows it (live deployments), None where event time
    # is the input's alone (replay): a deadline reached before the detectors had their time
    # waits for it (`timers.postponed`; docs/moderation.md, "Time").
    clock_ms: int | None = None
    live_window_ms: int = LIVE_WINDOW_MS
    # How long an answer may take to reach the job after the detector made it.
    evidence_grace_ms: int = EVIDENCE_GRACE_MS
    # How long a version keeps its full state after its last input, then its compact record.
    state_ttl_ms: int = STATE_TTL_MS
    review_retention_ms: int = REVIEW_RETENTION_MS
    # The reviewers' grants as of now (operators/review_access.py); None where the deployment
    # turned the check off (MODSTREAM_INSECURE_UNGRANTED_REVIEWS) or a test leaves it out.
    grants: ReviewGrants | None = None


@dataclass
class StepResult:
    state: State | None
    outputs: list[Output] = field(default_factory=list)
    timers: list[int] = field(default_factory=list)
    dead_letters: list[tuple[str, str]] = field(default_factory=list)  # (error_class, message)


def new_state(content_id: str, content_version: int) -> State:
    return {
        "cid": content_id,
        "ver": content_version,
        "content": None,
        "events": {},  # event id -> 1: O(1) duplicate checks however many inputs a key sees
        "evidence": {},
        "reporters": {},
        "report_weight": 0.0,  # the sum of the counted reporters' weights (report_count)
        "burst": [],  # [ts, new_reporter] of recent reports, oldest first
        "burst_new": 0,
        "human": None,
        "human_ids": [],  # digests of the reviews' and appeals' event ids applied (human.py)
        "appeal": None,
        "rev": 0,
        "last": None,
        "tasks": [],
        "open_tasks": [],
        "deadline": None,  # upsert ts + deadline_ms: the event time a deadline decides at
        "deadline_timer": None,  # while a deadline waits for the detectors: when it fires
        "asked_at": None,  # processing time the detectors were asked (live jobs only)
        "deleted": False,
        "shadow": {},
        "ttl": None,
        "ttl_timer": None,  # the one TTL timer armed; it re-arms itself if the TTL moved on
        "expiry": None,  # `expires_ts` of the PROVISIONAL_ALLOW in force, while one is
        "expiry_timer": None,  # the one expiry timer armed
        "provisional_expired": False,  # once set, never armed again: no timer chain
    }
