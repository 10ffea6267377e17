"""One content version's state (`VersionState`: a typed msgspec structure with the contract's
names, stored by modstream/moderation/state_schema.py as a MessagePack array in its fields' order),
what the moderation step is given and returns, and the moderation job's topics and time bounds.

A leaf module: every part of the step (modstream/moderation/step.py, the rule modules under
modstream/moderation/rules/, verdict.py, decide.py, records.py) imports its types and constants
from here, never from each other in a ring. modstream/moderation/step.py re-exports them for
the job and its tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from modstream.core.ids import SHA256
from modstream.core.limits import Limits
from modstream.policy.store import Resolution

if TYPE_CHECKING:
    from modstream.review.grants import ReviewGrants

# The moderation job's topics (contract names).
KEYED_TOPICS = (
    "content.versions",
    "detector.results",
    "moderation.reports",
    "review.decisions",
    "moderation.appeals",
    "moderation.reevaluate",
    "review.leases",  # modstream's own (modstream/contract/review.py)
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
    "scan.requests.text.backfill",
    "scan.requests.image.backfill",
    "scan.requests.video.backfill",
    "scan.requests.audio.backfill",
    "moderation.index",
)
# Internal: a decision that may add or reverse a strike, on its way to the author-keyed
# sanctions operator (modstream/enforcement/sanctions.py); never written to Kafka.
SANCTIONS = "_sanctions"
# Internal: a bank addition reaching a version decided before it
# (modstream/moderation/rules/retro.py, keyed to the version at the addition's ts); never
# written to Kafka.
RETRO = "moderation.retro"
ALL_TOPICS = (*KEYED_TOPICS, *BROADCAST_TOPICS, *OUTPUT_TOPICS)
# Human input: applies to a version decided at any time in the past (contract v1.1).
HUMAN_TOPICS = ("review.decisions", "moderation.appeals")
# A reviewer's claim of a task (modstream/review/access.py): like human input, it applies to a
# version decided at any time in the past, and to nothing else.
LEASE_TOPIC = "review.leases"
# How many digests of applied human inputs a version keeps
# (modstream/moderation/rules/human_input.py): far more reviews and appeals than one version sees;
# past it the oldest go, and the newest-`ts` rule still holds.
HUMAN_IDS_KEPT = 64
# The hex digits of an event id's digest a version keeps (`event_digest`).
DIGEST_CHARS = 16

# How long a decided version keeps its state for review, appeal and re-evaluation, and how long
# a deleted version (or evidence whose upsert never came) is remembered. docs/moderation.md.
STATE_TTL_MS = 30 * 86_400_000
# After STATE_TTL_MS a decided version is retired to a compact record (`rules.retention.retire`)
# that keeps its right to be reviewed and appealed (contract v1.1) this long after its last input.
REVIEW_RETENTION_MS = 400 * 86_400_000
# Live deployments' defaults (docs/moderation.md, "Time"): a deadline reached more than
# LIVE_WINDOW_MS behind the processing clock was reached while catching up; a detector's answer
# reaches the job within EVIDENCE_GRACE_MS (the scan job's transaction interval and the job's).
LIVE_WINDOW_MS = 30_000
EVIDENCE_GRACE_MS = 5_000
TOMBSTONE_TTL_MS = 86_400_000
# How long, in event time, a review read before its reviewer's lease of the task waits for that
# lease (modstream/moderation/rules/reviews.py), from its `ts` or, read late, from the operator's
# event time then: the two come from different topics, and human input never holds event time,
# so a lease stamped before its review may still be read after it. Past the wait the review is
# refused (`conflict`) as it was at once before; at most WAITING_REVIEWS_KEPT wait per version,
# a review beyond them is refused at once.
LEASE_WAIT_MS = 60_000
WAITING_REVIEWS_KEPT = 16
ORPHAN_TTL_MS = 86_400_000
DEFAULT_LIMITS = Limits()


Output = tuple[str, str, dict[str, Any]]  # (contract topic, Kafka key, record)

# The version document's schema (modstream/moderation/state_schema.py): the first field of every
# stored `VersionState`, so a reader knows the shape before it reads the rest.
STATE_SCHEMA = 5


class Content(msgspec.Struct, array_like=True):
    """The upload's facts the step decides on (an upsert's fields: modstream/contract/content.py),
    and the media reference the models asked after the gate need. A retired record drops the
    hashes."""

    ts: int
    author_id: str
    modality: str
    surface: str
    region: str
    audience: str
    account_risk: float
    size_bytes: int
    mime_type: str
    sha256: str | None = None
    phash: str | None = None
    segments: int = 1
    media_ref: str | None = None


class Evidence(msgspec.Struct, array_like=True):
    """One detector result kept under its evidence key (`detector|model_version|segment`)."""

    detector: str
    model_version: str
    segment_id: int | None
    status: str
    scores: dict[str, Any] | None
    evidence_ref: str | None = None
    ts: int | None = None  # None: stored before issue 12
    # The language of the text the detector read and its confidence
    # (modstream/moderation/language.py); None: it named none, or the result was stored before issue
    # 28 item 3.
    language: str | None = None
    language_confidence: float | None = None
    # When in the media its best finding is (a reader of text in media:
    # modstream/contract/detector.py `finding_ms`); None: no time, or stored before it was kept.
    finding_ms: int | None = None


class DetectorTally(msgspec.Struct, array_like=True):
    """What one detector's stored results add up to, kept as each is stored
    (rules/evidence.py), so that reading the evidence (modstream/moderation/evidence_view.py)
    never walks every result again: how many results it counts (the read checks the sum against
    the results stored), the segment ids they answered, in the order they came (-1: a result
    with no `segment_id`, the whole content), whether one of them was not `ok`, whether one of
    the `ok` ones had a score that is not a number in [0, 1], and the best valid score per
    label over segments and model versions."""

    results: int = 0
    segments: list[int] = []
    failed: bool = False
    broken: bool = False
    best: dict[str, float] = {}


class LastDecision(msgspec.Struct, array_like=True):
    """The latest decision revision as the Content Service applies it, and what an appeal of it
    shows its reviewer (`reasons`, `evidence_refs`: None in a tombstone and before issue 12)."""

    outcome: str
    restriction: str | None
    state: str
    visibility: str
    reasons: list[str] | None = None
    evidence_refs: list[str] | None = None


class HumanDecision(msgspec.Struct, array_like=True):
    """The human outcome in force (modstream/moderation/rules/human_input.py): the review's
    outcome and free-text reason, its `ts`, and the digest of its event id (None: applied before
    schema 4)."""

    outcome: str
    reason: str | None
    ts: int
    digest: str | None = None


class ShadowDecision(msgspec.Struct, array_like=True):
    """A shadow or canary policy's latest candidate on this version
    (modstream/moderation/decide.py)."""

    outcome: str
    restriction: str | None
    state: str
    decision_revision: int


class Lease(msgspec.Struct, array_like=True):
    """A reviewer's claim of one of the version's tasks (modstream/review/access.py)."""

    reviewer_id: str
    expires_ts: int


class BurstReport(msgspec.Struct, array_like=True):
    """A recent report in the brigading window: its `ts`, and whether its reporter is new."""

    ts: int
    new_reporter: bool


class OpenTask(msgspec.Struct, array_like=True):
    """A task the job opened and no review closed yet: its queue and priority now, and the
    event time it opened (or moved) at, which the escalation rule waits from
    (modstream/review/escalation.py). `escalated`: the rule applied once; it never applies again."""

    queue: str
    priority: int
    ts: int
    escalated: bool = False


class SecondReviewWait(msgspec.Struct, array_like=True):
    """A first review waiting for its second reviewer (modstream/review/second_review.py): the
    second-review task, the task the first review decided and its queue, the first reviewer and
    outcome, and whether it was sampled (already in force) or required (not yet in force)."""

    task_id: str
    of_task: str
    queue: str
    reviewer_id: str
    outcome: str
    reason: str | None
    ts: int
    digest: str
    sampled: bool


class WaitingReview(msgspec.Struct, array_like=True):
    """A review read before its reviewer's lease of its task (rules/reviews.py): the record as
    admitted (JSON, read again when the lease comes or written to the DLQ when the wait ends),
    its task and reviewer, its `ts`, the event time its wait ends at, its event id's digest
    (kept in `events` while it waits) and the refusal it gets if no lease comes."""

    raw: str
    task_id: str
    reviewer_id: str
    ts: int
    until: int
    digest: str
    refusal: str


class VersionState(msgspec.Struct, array_like=True, kw_only=True):
    """One content version's state: full, a tombstone (`deleted`: `timers.compact_tombstone`)
    or a retired record (`retired`: `rules.retention.retire`), each every field at its default but
    those it keeps.

    Stored as a MessagePack array in this field order (modstream/moderation/state_schema.py,
    `dump_version`): the order is the stored format. A later schema only appends fields (with
    defaults), never reorders, renames the type of, or removes one; `schema` stays first."""

    schema: int = STATE_SCHEMA
    content_id: str
    content_version: int
    decision_revision: int = 0
    last_decision: LastDecision | None = None
    content: Content | None = None
    # evidence key -> result; the key orders the results a decision cites
    evidence: dict[str, Evidence] = {}
    human: HumanDecision | None = None
    # digests of the reviews' and appeals' event ids applied, oldest first (human.py)
    human_ids: list[str] = []
    appeal_id: str | None = None  # the active appeal's
    tasks: list[str] = []
    open_tasks: list[str] = []
    report_weight: float = 0.0  # the sum of the counted reporters' weights (report_count)
    provisional_expired: bool = False  # once set, never armed again: no timer chain
    leases: dict[str, Lease] = {}  # task id -> its lease
    retired: bool = False
    ttl: int | None = None
    ttl_timer: int | None = None  # the one TTL timer armed; it re-arms itself if the TTL moved on
    # `event_digest` of each input's event id -> 1: O(1) duplicate checks however many inputs
    # a key sees, in a bounded size whatever an id's length
    events: dict[str, int] = {}
    reporters: dict[str, float] = {}  # reporter id -> weight counted
    burst: list[BurstReport] = []  # recent reports, oldest first
    burst_new: int = 0
    deadline: int | None = None  # upsert ts + deadline_ms: the event time a deadline decides at
    deadline_timer: int | None = None  # while a deadline waits for the detectors: when it fires
    deadline_decided: bool = False
    asked_at: int | None = None  # processing time the detectors were asked (live jobs only)
    deleted: bool = False
    shadow: dict[str, ShadowDecision] = {}  # policy version -> its latest candidate
    expiry: int | None = None  # `expires_ts` of the PROVISIONAL_ALLOW in force, while one is
    expiry_timer: int | None = None  # the one expiry timer armed
    # Cost ordering (modstream/scanning/plan.py): where the scan is, the required detectors never
    # asked, those asked by a re-evaluation (`<policy version>:<detector>`), and the priority
    # the models are asked at once the gate passed (None: live).
    scan: str | None = None
    unasked: list[str] = []
    backfilled: list[str] = []
    scan_priority: str | None = None
    # Second review and escalation (issue 29 items 2 and 3; after schema 5, defaults so a
    # state stored before them loads): the open tasks the job tracks by id, the first review
    # waiting for its second, the escalation task of a disagreement, and the one escalation
    # timer armed.
    task_queues: dict[str, OpenTask] = {}
    second: SecondReviewWait | None = None
    escalation_task: str | None = None
    escalation_timer: int | None = None
    # Reviews read before the lease they need, in the order read, each waiting until its `until`
    # (rules/reviews.py; after schema 5, defaults so a state stored before loads), and the one
    # timer armed for the first wait to end.
    waiting_reviews: list[WaitingReview] = []
    review_wait_timer: int | None = None
    # The evidence tallied per detector as it is stored (`DetectorTally`; after schema 5, a
    # default so a state stored before loads). None: not kept (a state stored before it until its
    # next result, a retired record, or results under keys from before issue 12): the evidence
    # is then read result by result, as before.
    tally: dict[str, DetectorTally] | None = None


State = VersionState


@dataclass(frozen=True)
class ReportWeight:
    """A report's weight from the reporter-side gate (modstream/moderation/rules/reports.py)."""

    weight: float  # 0 when not counted
    new_reporter: bool
    reason: str | None = None  # why it is not counted


@dataclass(frozen=True)
class Context:
    """What the adapter knows at the event's time: policies, the content's bank matches, and
    for a report its weight from the reporter-side gate (modstream/moderation/rules/reports.py),
    and the deployment's bounds on one version's state (modstream/core/limits.py)."""

    resolution: Resolution
    hash_matches: frozenset[str] = frozenset()
    report: ReportWeight | None = None
    limits: Limits = DEFAULT_LIMITS
    # The processing clock when event time follows it (live deployments), None where event time
    # is the input's alone (replay): a deadline reached before the detectors had their time
    # waits for it (`rules.deadline.postponed`; docs/moderation.md, "Time").
    clock_ms: int | None = None
    live_window_ms: int = LIVE_WINDOW_MS
    # How long an answer may take to reach the job after the detector made it.
    evidence_grace_ms: int = EVIDENCE_GRACE_MS
    # How long a version keeps its full state after its last input, then its compact record.
    state_ttl_ms: int = STATE_TTL_MS
    review_retention_ms: int = REVIEW_RETENTION_MS
    # The reviewers' grants as of now (modstream/review/access.py); None where the deployment
    # turned the check off (MODSTREAM_INSECURE_UNGRANTED_REVIEWS) or a test leaves it out.
    grants: ReviewGrants | None = None
    # The operator's event time when a review is applied (its watermark), which a review read
    # late, behind it, waits LEASE_WAIT_MS from (rules/reviews.py); None: the input's own `ts`
    # is the event time (tests, the bench's peers).
    event_time: int | None = None


class StepResult(msgspec.Struct):
    """What a step and a timer return. A Struct, not a dataclass: a few are made per event, and
    a Struct's `__init__` is msgspec's C where a dataclass's is interpreted
    (modstream/core/values.py)."""

    state: State | None
    outputs: list[Output] = msgspec.field(default_factory=list)
    timers: list[int] = msgspec.field(default_factory=list)
    dead_letters: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (class, message)
    # Second reviews compared (modstream/review/second_review.py): counted by the job's metrics,
    # never written to Kafka (the review.tasks and review.decisions records show the same).
    agreements: list[Agreement] = msgspec.field(default_factory=list)
    # Dead letters of an input other than the one applied (topic, class, message, raw, ts): a
    # review that waited for its lease, refused when its wait ends or when the lease came.
    letters_of: list[tuple[str, str, str, str, int]] = msgspec.field(default_factory=list)


@dataclass(frozen=True)
class Agreement:
    """One second review compared with the first: the first task's queue, both reviewers and
    both outcomes, and whether it was a sampled (blind) or a required second review."""

    queue: str
    first_reviewer: str
    second_reviewer: str
    first_outcome: str
    second_outcome: str
    sampled: bool


def event_digest(event_id: str) -> str:
    """What a version keeps of an input's event id (`events`, `human_ids`): 16 hex digits (64
    bits) of its sha256. Among the inputs of one version an accidental collision is about
    n^2 / 2^65 likely (2^-45 for a thousand inputs); making one on purpose is a second preimage."""
    return str(SHA256(event_id.encode("utf-8")).hexdigest())[:DIGEST_CHARS]


def new_state(content_id: str, content_version: int) -> State:
    return VersionState(content_id=content_id, content_version=content_version)


def uploaded(state: State) -> Content:
    """The version's content, for the code only an uploaded version reaches (a decision, a scan)."""
    if state.content is None:
        raise ValueError("moderation: a decision or scan of a version not uploaded")
    return state.content


def from_document(document: dict[str, Any]) -> State:
    """`VersionState` from its named document (a migrated schema 4 document, or the JSON text
    `state_schema.dump_version` writes where MessagePack cannot hold a value): a field absent
    takes its default, a name it does not have is dropped."""
    state = _typed(VersionState, document)
    if state.content is not None:
        state.content = _typed(Content, document["content"])
    if state.last_decision is not None:
        state.last_decision = _typed(LastDecision, document["last_decision"])
    if state.human is not None:
        state.human = _typed(HumanDecision, document["human"])
    state.evidence = {key: _typed(Evidence, entry) for key, entry in state.evidence.items()}
    state.shadow = {key: _typed(ShadowDecision, kept) for key, kept in state.shadow.items()}
    state.leases = {key: _typed(Lease, held) for key, held in state.leases.items()}
    state.burst = [_typed(BurstReport, seen) for seen in state.burst]
    state.task_queues = {
        key: _typed(OpenTask, held) for key, held in (state.task_queues or {}).items()
    }
    if state.second is not None:
        state.second = _typed(SecondReviewWait, document["second"])
    state.waiting_reviews = [_typed(WaitingReview, held) for held in state.waiting_reviews or ()]
    if state.tally is not None:
        state.tally = {key: _typed_tally(kept) for key, kept in state.tally.items()}
    state.events = dict(state.events or {})
    state.reporters = dict(state.reporters or {})
    for name in ("human_ids", "tasks", "open_tasks", "unasked", "backfilled"):
        setattr(state, name, list(getattr(state, name) or ()))
    return state


def _typed_tally(document: Any) -> DetectorTally:
    """A detector's tally from its named document (a dict when read from JSON text)."""
    kept = _typed(DetectorTally, document)
    kept.segments = list(kept.segments)
    kept.best = dict(kept.best)
    return kept


def to_document(state: State) -> dict[str, Any]:
    """The named document of `state` (`from_document`'s inverse), nested parts included."""
    return {name: _named(getattr(state, name)) for name in state.__struct_fields__}


_Typed = TypeVar("_Typed", bound=msgspec.Struct)


def _typed(kind: type[_Typed], document: Any) -> _Typed:
    return kind(**{name: document[name] for name in kind.__struct_fields__ if name in document})


def _named(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return {name: _named(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, dict):
        return {key: _named(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_named(item) for item in value]
    return value
