"""Versions' state as earlier releases of the moderation job stored it, for tests that today's
code restores it and decides the same (a savepoint of an old job must restore).

- `PRE_ISSUE_12_*`: documents written by the step of commit 32d9481 (before issue 12).
- The schema 4 scenarios (commit b6840d2): `SCENARIOS` build versions with the per-version
  driver, `continuation` is what happens to each after a restore, and `observed` what a
  continuation emitted; `FIXTURE` holds what the schema 4 job stored and emitted for them.
  It was written by that commit's `python -m tests.operators.schema_4_scenarios`: regenerate it
  only from a checkout of that commit.
- `as_schema_4(state)`: today's state as the schema 4 job would have held it.

A test of a state migration of one's own restores such a document with
`modstream.moderation.state_schema.load` and drives it on with `Version`:

    version = Version()
    version.state = state_schema.load(msgspec.msgpack.encode(PRE_ISSUE_12_IMAGE), "version")
    version.fire_until(T0 + 60_000)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from modstream.core.config import PROJECT_ROOT
from modstream.moderation.state import to_document
from modstream.testing.records import T0, appeal_record, delete, review_lease
from modstream.testing.versions import Version, context, review

# Written by the step of commit 32d9481 (before issue 12), as it was: an image upload on a
# comment, decided PROVISIONAL_ALLOW (`scanning`) by the fast gate, both detectors asked.
# Produced by running that commit's tests.operators.test_moderation.Version (today's
# modstream.testing.versions.Version) with
# `upload(modality="image", mime_type="image/jpeg", surface="comment")`.
PRE_ISSUE_12_IMAGE: dict[str, Any] = json.loads(
    '{"cid":"c-1","ver":1,"content":{"ts":1764460800000,"author_id":"author-1",'
    '"modality":"image","surface":"comment","region":"DE","audience":"all","account_risk":0.2,'
    '"size_bytes":52,"mime_type":"image/jpeg","sha256":"abababababababababababababababababab'
    'abababababababababababababab","phash":null,"segments":1},"events":{"ev-c-1-1764460800000":'
    '1},"evidence":{},"reporters":{},"report_weight":0.0,"burst":[],"burst_new":0,"human":null,'
    '"appeal":null,"rev":1,"last":{"outcome":"PROVISIONAL_ALLOW","restriction":null,"state":'
    '"scanning","visibility":"public"},"tasks":[],"open_tasks":[],"deadline":1764460830000,'
    '"deleted":false,"shadow":{},"ttl":1767052800000,"ttl_timer":1767052800000}'
)
# The same document with the fast gate's decision today's shipped policy makes: media stays
# PENDING until its integrity gate passed (issue 27, point 9), so a fresh upload compares.
PRE_ISSUE_12_IMAGE_NOW: dict[str, Any] = {
    **PRE_ISSUE_12_IMAGE,
    "last": {
        "outcome": "PENDING",
        "restriction": None,
        "state": "scanning",
        "visibility": "pending",
    },
}
# The timers that commit's job had registered for it (restored with the checkpoint).
PRE_ISSUE_12_TIMERS = {1764460830000, 1767052800000}
# The same commit's tombstone of a text upload deleted 100 ms later: it kept the content.
PRE_ISSUE_12_TOMBSTONE: dict[str, Any] = json.loads(
    '{"cid":"c-1","ver":1,"content":{"ts":1764460800000,"author_id":"author-1","modality":'
    '"text","surface":"comment","region":"DE","audience":"all","account_risk":0.2,"size_bytes":'
    '52,"mime_type":"text/plain","sha256":"abababababababababababababababababababababababababab'
    'ababababababab","phash":null,"segments":1},"events":{"ev-c-1-1764460800000":1,'
    '"del-c-1-1764460800100":1},"evidence":{},"reporters":{},"report_weight":0.0,"burst":[],'
    '"burst_new":0,"human":null,"appeal":null,"rev":2,"last":{"outcome":"PROVISIONAL_ALLOW",'
    '"restriction":null,"state":"deleted","visibility":"hidden"},"tasks":[],"open_tasks":[],'
    '"deadline":1764460805000,"deleted":true,"shadow":{},"ttl":1764547200100,"ttl_timer":'
    "1764547200100}"
)
IMAGE = {"modality": "image", "mime_type": "image/jpeg", "surface": "comment"}

# Recorded by the schema 4 job's code (kept in the test suite: tests/operators/data/).
FIXTURE = PROJECT_ROOT / "tests" / "operators" / "data" / "state_schema_4.msgpack"
ONE_DAY = 86_400_000


def _image_decided() -> Version:
    """An image with its gate and model evidence, a report, a lease: a full state."""
    version = Version()
    version.upload(**IMAGE)
    version.evidence(detector="media_check", model_version="mc-1", scores={}, at=T0 + 300)
    version.evidence(
        detector="nsfw_image",
        model_version="nsfw-2",
        scores={"nsfw": 0.91},
        at=T0 + 900,
        evidence_ref="s3://ev/1",
    )
    version.send("review.leases", review_lease(task_id="t-1", reviewer_id="r1"))
    return version


def _text_waiting() -> Version:
    """A text upload whose detector has not answered: its deadline is pending."""
    version = Version()
    version.upload()
    return version


def _reviewed_then_retired() -> Version:
    version = Version()
    version.upload()
    version.evidence(at=T0 + 500)
    version.send("review.decisions", review("t-1", "BLOCK", at=T0 + 1000))
    version.fire_until(T0 + 40 * ONE_DAY)
    return version


def _deleted() -> Version:
    version = Version()
    version.upload()
    version.send("content.versions", delete(at=T0 + 100))
    return version


def _shadowed() -> Version:
    version = Version(context(shadow=True))
    version.upload()
    version.evidence(at=T0 + 500, scores={"offensive": 0.97})
    return version


SCENARIOS: dict[str, Callable[[], Version]] = {
    "image_decided": _image_decided,
    "text_waiting": _text_waiting,
    "reviewed_then_retired": _reviewed_then_retired,
    "deleted": _deleted,
    "shadowed": _shadowed,
}


def continuation(version: Version) -> None:
    """What happens to every restored version: time passes, a review, an appeal, a duplicate,
    retirement, and a review after it."""
    version.fire_until(T0 + 60_000)
    version.send("review.decisions", review("t-2", "ALLOW", at=T0 + 70_000))
    version.send("moderation.appeals", appeal_record(appeal_id="a-9", ts=T0 + 80_000))
    version.send("review.decisions", review("appeal-a-9", "BLOCK", at=T0 + 90_000))
    version.send("review.decisions", review("appeal-a-9", "BLOCK", at=T0 + 90_000))
    version.fire_until(T0 + 80 * ONE_DAY)
    version.send("review.decisions", review("t-3", "ALLOW", at=T0 + 81 * ONE_DAY))
    version.fire_until(T0 + 900 * ONE_DAY)


# Fields output records gained after commit b6840d2, where the fixture was recorded: left out
# of what is compared (the schema 4 job never wrote them). `workflow_version`: issue 29 item 5;
# `language`: issue 28 item 3.
ADDED_SINCE_FIXTURE = ("workflow_version", "language")


def observed(version: Version) -> list[Any]:
    """What a continuation emitted, as JSON text (compared as written), without the fields
    added since the fixture was recorded, at any depth (a review task holds its decision)."""
    return [json.dumps(_recorded(version.outputs), sort_keys=True), sorted(version.dead_letters)]


def _recorded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _recorded(v) for k, v in value.items() if k not in ADDED_SINCE_FIXTURE}
    if isinstance(value, list | tuple):
        return [_recorded(item) for item in value]
    return value


def as_schema_4(state: Any) -> dict[str, Any]:
    """Today's `VersionState` as the schema 4 job would have held it (its names, its lists):
    `state_schema._version_4_to_5` backwards, for documents of earlier jobs made from today's
    flows (but `events`, whose ids only their digests are left of). The fixture's bytes are the
    real ones."""
    document = to_document(state)
    renamed = {"content_id": "cid", "content_version": "ver", "decision_revision": "rev"}
    renamed |= {"last_decision": "last", "appeal_id": "appeal"}
    old = {renamed.get(key, key): value for key, value in document.items()}
    if old["last"] is not None:
        old["last"] = {("refs" if k == "evidence_refs" else k): v for k, v in old["last"].items()}
    if old["human"] is not None:
        old["human"] = {("id" if k == "digest" else k): v for k, v in old["human"].items()}
    old["shadow"] = {key: list(kept.values()) for key, kept in old["shadow"].items()}
    old["leases"] = {key: list(held.values()) for key, held in old["leases"].items()}
    old["burst"] = [list(seen.values()) for seen in old["burst"]]
    old["schema"] = 4
    return old
