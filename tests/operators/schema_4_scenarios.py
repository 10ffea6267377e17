"""Versions as the schema 4 job stored them (commit b6840d2), and what that job did next with
each: the fixture `data/state_schema_4.msgpack` that tests/operators/test_state_schema.py
restores with today's code, which must decide the same (a savepoint of the schema 4 job
restores). Regenerate only from a checkout of that commit:
`python -m tests.operators.schema_4_scenarios` (the file is written, never read, there)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from modstream.moderation import state_schema
from modstream.moderation.state import to_document
from tests.conftest import T0, appeal_record, delete, review_lease
from tests.operators.test_moderation import Version, context, review

FIXTURE = Path(__file__).parent / "data" / "state_schema_4.msgpack"
ONE_DAY = 86_400_000
IMAGE = {"modality": "image", "mime_type": "image/jpeg", "surface": "comment"}


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


def main() -> None:
    cases = []
    for name, build in SCENARIOS.items():
        version = build()
        stored = state_schema.dump_version(version.state)  # type: ignore[arg-type]
        restored = Version(version.ctx)
        restored.state = state_schema.load(stored, "version")  # type: ignore[assignment]
        restored.timers = set(version.timers)
        continuation(restored)
        cases.append([name, stored, sorted(version.timers), *observed(restored)])
    FIXTURE.write_bytes(msgspec.msgpack.encode(cases))
    print(f"{FIXTURE}: {len(cases)} versions")


if __name__ == "__main__":
    main()
