"""Every topic of the contract, with partitions and retention, created idempotently.

Retention (documented in docs/topics.md): inputs 7 days; decisions, actions, sanctions and the
DLQ 30 days (audit and replay); policy.rules, hash.bank and content.visibility compacted, so
their latest value per key is kept forever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from modstream.core.config import TopicSettings, kafka_options

DAY_MS = 86_400_000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
    purpose: str = ""


def _delete(days: int) -> dict[str, str]:
    return {"cleanup.policy": "delete", "retention.ms": str(days * DAY_MS)}


_COMPACT = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(60_000)}
# policy.rules is keyed by policy_id, so compaction would keep only the newest record of each
# policy; rollback needs every version and `policy show --history` is the audit trail. Records
# younger than ten years are therefore never compacted.
_POLICY_HISTORY = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(3650 * DAY_MS)}

TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec("content.versions", 4, _delete(7), "uploads, edits, deletes (Content Service)"),
    TopicSpec("detector.results", 4, _delete(7), "detector evidence per segment"),
    TopicSpec("policy.rules", 1, _POLICY_HISTORY, "signed policy versions and control records"),
    TopicSpec("hash.bank", 1, _COMPACT, "known-bad hashes, keyed by bank and hash"),
    TopicSpec("moderation.reports", 4, _delete(7), "user reports"),
    TopicSpec("review.decisions", 4, _delete(30), "human review outcomes"),
    TopicSpec("moderation.appeals", 4, _delete(30), "appeals by authors"),
    TopicSpec("moderation.reevaluate", 4, _delete(7), "re-decide on stored evidence"),
    TopicSpec("moderation.decisions", 4, _delete(30), "every decision revision (audit)"),
    TopicSpec("moderation.actions", 4, _delete(30), "visibility actions, exactly once"),
    TopicSpec("review.tasks", 4, _delete(30), "work for human reviewers"),
    TopicSpec("content.visibility", 4, _COMPACT, "effective visibility per content"),
    TopicSpec("moderation.discrepancies", 4, _delete(30), "reconciler findings"),
    TopicSpec("account.actions", 4, _delete(30), "sanctions on authors, exactly once"),
    TopicSpec("user.notifications", 4, _delete(30), "what authors are told"),
    TopicSpec("moderation.shadow", 4, _delete(7), "shadow and canary policy decisions"),
    TopicSpec("moderation.dlq", 2, _delete(30), "rejected input, with class and raw record"),
    # modstream's own topic, not in the contract: what the ingest check let through.
    TopicSpec(
        "content.validated", 4, _delete(7), "content.versions records that passed the schema"
    ),
    # Scan requests per modality (moderation job -> scan jobs), docs/scanning.md.
    TopicSpec("scan.requests.text", 4, _delete(7), "text scan requests"),
    TopicSpec("scan.requests.image", 4, _delete(7), "image scan requests"),
    TopicSpec("scan.requests.video", 4, _delete(7), "video segment scan requests"),
    TopicSpec("scan.requests.audio", 4, _delete(7), "audio scan requests"),
    # Backfill (re-evaluation) requests apart from live ones: a scan job reads both and
    # serves live first (modstream/scanning/admission.py; docs/contract-notes.md).
    TopicSpec("scan.requests.text.backfill", 4, _delete(7), "text backfill scan requests"),
    TopicSpec("scan.requests.image.backfill", 4, _delete(7), "image backfill scan requests"),
    TopicSpec("scan.requests.video.backfill", 4, _delete(7), "video backfill scan requests"),
    TopicSpec("scan.requests.audio.backfill", 4, _delete(7), "audio backfill scan requests"),
    # One compacted record per decided content version (moderation job): what re-evaluation
    # selects from (modstream/ops/reevaluate.py) instead of reading every decision revision.
    TopicSpec("moderation.index", 4, _COMPACT, "latest decision and facts per content version"),
    # Review access the moderation job checks before it applies a review (issue 27,
    # modstream/contract/review.py): grants keyed by reviewer with their history kept as
    # policy.rules keeps its own (a review is checked against the grant in force at its ts, after a
    # start without a checkpoint too), leases keyed by content_id like the reviews they follow.
    TopicSpec("review.grants", 1, _POLICY_HISTORY, "queues each reviewer may decide (lead-signed)"),
    TopicSpec("review.leases", 4, _delete(30), "who holds which review task, until when"),
    # The review console's access log (issue 30, modstream/contract/review.py): who saw, revealed,
    # claimed and decided what, and what the server refused; an audit, kept as long as the
    # decisions.
    TopicSpec("review.access", 4, _delete(30), "review console access log (audit)"),
    # The reconciler's repairs for the Action Service: an action record plus `repair_of`.
    TopicSpec("enforcement.repairs", 4, _delete(7), "reconciler re-applies, exactly once"),
    # The reconciler's exposure windows (modstream/moderation/exposure.py): one record per content
    # version shown and then restricted, what the archive's `exposure` table holds.
    TopicSpec("enforcement.exposure", 4, _delete(30), "exposure window per restricted version"),
)


def physical(name: str, prefix: str | None = None) -> str:
    """A deployment's name for contract topic `name`: `<prefix>.<name>`, or `name` itself."""
    return f"{prefix}.{name}" if prefix else name


def contract(physical_name: str, prefix: str | None = None) -> str:
    """The contract name of a deployment's topic (the inverse of `physical`)."""
    if prefix and physical_name.startswith(prefix + "."):
        return physical_name[len(prefix) + 1 :]
    return physical_name


def physical_names(prefix: str | None = None) -> dict[str, str]:
    """Every topic modstream knows, contract name -> the deployment's name."""
    return {spec.name: physical(spec.name, prefix) for spec in TOPICS}


def laid_out(specs: Iterable[TopicSpec], layout: TopicSettings | None) -> list[TopicSpec]:
    """`specs` with the settings' partition count (`[topics] partitions`) for the partitioned
    ones; the single-partition topics (policy.rules, hash.bank: every job reads all of them
    in order) stay at one."""
    if layout is None or layout.partitions is None:
        return list(specs)
    count = layout.partitions
    return [replace(spec, partitions=count) if spec.partitions > 1 else spec for spec in specs]


def create_topics(
    bootstrap_servers: str,
    specs: Iterable[TopicSpec] = TOPICS,
    say: Callable[[str], None] = print,
    timeout_s: float = 30.0,
    layout: TopicSettings | None = None,
) -> list[str]:
    """Create each missing topic; report existing ones (and a partition count that differs).
    `layout`: the settings' replication factor and partitions (default: 1, each spec's own).

    Returns the names created. Never alters an existing topic: changing partitions reshuffles
    keys, which must be a deliberate operation.
    """
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    timeout_ms = int(timeout_s * 1000)
    replication = layout.replication_factor if layout is not None else 1
    admin = _admin(bootstrap_servers, timeout_ms)
    created: list[str] = []
    try:
        existing = set(admin.list_topics())
        specs = laid_out(specs, layout)
        missing = [spec for spec in specs if spec.name not in existing]
        for spec in missing:
            try:
                admin.create_topics(
                    [
                        NewTopic(
                            spec.name,
                            spec.partitions,
                            replication,
                            topic_configs=dict(spec.config),
                        )
                    ],
                    timeout_ms=timeout_ms,
                )
                created.append(spec.name)
                say(f"created  {spec.name} ({spec.partitions} partitions)")
            except TopicAlreadyExistsError:
                say(f"exists   {spec.name}")
        present = [spec for spec in specs if spec.name in existing]
        if present:
            partitions = _partition_counts(admin, [spec.name for spec in present])
            for spec in present:
                actual = partitions.get(spec.name)
                note = (
                    ""
                    if actual == spec.partitions
                    else f" (has {actual}, spec says {spec.partitions})"
                )
                say(f"exists   {spec.name}{note}")
    finally:
        admin.close()
    return created


def partition_counts(
    bootstrap_servers: str, names: Iterable[str], timeout_s: float = 30.0
) -> dict[str, int]:
    """How many partitions each named topic has on the broker (a missing topic is left out)."""
    admin = _admin(bootstrap_servers, int(timeout_s * 1000))
    try:
        existing = set(admin.list_topics())
        wanted = [name for name in names if name in existing]
        return _partition_counts(admin, wanted) if wanted else {}
    finally:
        admin.close()


def _admin(bootstrap_servers: str, timeout_ms: int) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=timeout_ms,
        client_id="modstream-topics",
        **kafka_options(),
    )


def _partition_counts(admin: object, names: list[str]) -> dict[str, int]:
    described = admin.describe_topics(names)  # type: ignore[attr-defined]
    return {entry["name"]: len(entry["partitions"]) for entry in described}
