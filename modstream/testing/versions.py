"""The per-version driver: one (content_id, content_version) key through the moderation step,
as Flink drives it, without a JVM.

`Version(ctx)` holds the key's state, round-tripped through its stored form after every step
(what Flink stores), the outputs by topic, the armed timers and the dead letters. A policy rule
test builds a context from the shipped policy with the change under test, sends records and
reads the decisions:

    from modstream.testing.records import T0, evidence
    from modstream.testing.versions import Version, context

    version = Version(context(default="PENDING"))
    version.upload(surface="comment")
    version.evidence(at=T0 + 1, scores={"offensive": 0.97})
    assert version.last["outcome"] == "BLOCK"

`fire(ts)` / `fire_until(ts)` fire timers as a watermark reaching `ts` would.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from modstream.contract import parse
from modstream.moderation import state_schema
from modstream.moderation.state import Content, VersionState
from modstream.moderation.step import Context, Output, StepResult, on_timer, step
from modstream.policy.store import PolicyStore
from modstream.testing.policies import global_document
from modstream.testing.records import ONE_SECOND, T0, evidence, upload


def context(
    *,
    paused: bool = False,
    banks: Iterable[str] = (),
    shadow: bool = False,
    **document_changes: Any,
) -> Context:
    """The step's context under `global_document(1, **document_changes)`: a rule test changes
    the policy here. `paused`: policy paused; `banks`: the hash banks the content matches;
    `shadow`: a shadow policy (version 2) evaluated beside the active one."""
    store = PolicyStore()
    store.install(global_document(1, **document_changes), ts=0)
    resolution = store.resolve("global", T0, "x")
    if shadow:
        shadow_store = PolicyStore()
        shadow_store.install(
            global_document(
                2, default="PENDING", unknown={"high_risk": "BLOCK", "default": "BLOCK"}
            ),
            ts=0,
        )
        shadow_policy = shadow_store.resolve("global", T0, "x").decide
        assert shadow_policy is not None, "the shadow document installs"
        resolution = type(resolution)(resolution.decide, (shadow_policy,), paused)
    elif paused:
        resolution = type(resolution)(resolution.decide, (), True)
    return Context(resolution=resolution, hash_matches=frozenset(banks))


CTX = context()


class Version:
    """Drives one (content_id, content_version) key through `step` / `on_timer` like Flink."""

    def __init__(self, ctx: Context = CTX) -> None:
        self.ctx = ctx
        self.state: VersionState | None = None
        self.outputs: list[Output] = []
        self.timers: set[int] = set()
        self.dead_letters: list[tuple[str, str]] = []

    def _take(self, result: StepResult) -> StepResult:
        # The state must survive its stored form's round trip: it is what Flink stores.
        stored = None if result.state is None else state_schema.dump_version(result.state)
        self.state = state_schema.load_version(stored)
        self.outputs += result.outputs
        self.timers |= set(result.timers)
        self.dead_letters += result.dead_letters
        self.dead_letters += [
            (error_class, message) for _, error_class, message, _, _ in result.letters_of
        ]
        return result

    def send(self, topic: str, record: dict[str, Any]) -> StepResult:
        parsed = parse(topic, json.dumps(record))
        return self._take(step(self.state, topic, parsed, record["ts"], self.ctx))

    def upload(self, **fields: Any) -> StepResult:
        return self.send("content.versions", upload(**fields))

    def evidence(self, **fields: Any) -> StepResult:
        return self.send("detector.results", evidence(**fields))

    def fire(self, ts: int) -> StepResult:
        self.timers.discard(ts)
        return self._take(on_timer(self.state, ts, self.ctx))

    def fire_until(self, ts: int) -> None:
        """Fire every timer up to `ts`, including those armed while firing (as Flink does)."""
        while due := sorted(t for t in self.timers if t <= ts):
            self.fire(due[0])

    def of(self, topic: str) -> list[dict[str, Any]]:
        return [record for name, _, record in self.outputs if name == topic]

    @property
    def decisions(self) -> list[dict[str, Any]]:
        return self.of("moderation.decisions")

    @property
    def last(self) -> dict[str, Any]:
        return self.decisions[-1]


def review(
    task_id: str = "t-ext", outcome: str = "BLOCK", at: int = T0 + 10, **fields: Any
) -> dict[str, Any]:
    """Reviewer r1's decision on c-1 version 1 (unsigned; `Version` needs no signatures)."""
    return {
        "event_id": f"rv-{task_id}-{at}",
        "task_id": task_id,
        "content_id": "c-1",
        "content_version": 1,
        "reviewer_id": "r1",
        "outcome": outcome,
        "reason": "reviewed",
        "ts": at,
        **fields,
    }


def appeal(appeal_id: str = "a-1", at: int = T0 + 25 * ONE_SECOND) -> dict[str, Any]:
    """The author's appeal of decision revision 1 of c-1 version 1."""
    return {
        "event_id": f"ap-{appeal_id}",
        "appeal_id": appeal_id,
        "content_id": "c-1",
        "content_version": 1,
        "decision_revision": 1,
        "user_id": "author-1",
        "ts": at,
    }


# The upload's facts a `Content` keeps, taken from `records.upload` so the two cannot drift apart.
_UPLOAD_FACTS = (
    "author_id", "surface", "region", "audience", "account_risk", "size_bytes", "mime_type",
)  # fmt: skip


def content(upload_ts: int, modality: str = "text", **fields: Any) -> Content:
    """A version's uploaded `Content` at `upload_ts` (`records.upload`'s text comment by
    default, without its hashes) for a test that builds a state by hand; `fields` override any
    other fact."""
    record = upload(at=upload_ts)
    facts = {name: record[name] for name in _UPLOAD_FACTS}
    return Content(ts=upload_ts, modality=modality, **{**facts, **fields})


def image(**fields: Any) -> dict[str, Any]:
    """The fields that make `upload(**image())` an image: `version.upload(**image(...))`."""
    return {"modality": "image", "mime_type": "image/jpeg", "size_bytes": 50_000, **fields}


def image_evidence(
    content_id: str,
    at: int,
    *,
    nsfw: float = 0.01,
    malware: float = 0.0,
    segment_id: int | None = None,
) -> list[dict[str, Any]]:
    """The two detector.results an image needs under the shipped policy (nsfw_image and the
    media_check integrity gate), scored `nsfw` and `malware`."""
    return [
        evidence(
            content_id,
            at,
            event_id=f"n-{content_id}-{at}-{segment_id}",
            detector="nsfw_image",
            model_version="open_nsfw-1",
            segment_id=segment_id,
            scores={"nsfw": nsfw},
        ),
        evidence(
            content_id,
            at + 1,
            event_id=f"m-{content_id}-{at}-{segment_id}",
            detector="media_check",
            model_version="media-1",
            segment_id=segment_id,
            scores={"malware": malware, "corrupt": 0.0, "mime_mismatch": 0.0},
        ),
    ]


def with_clock(clock_ms: int) -> Context:
    """`CTX` in a live job whose clock reads `clock_ms`: a 30 s live window, 5 s evidence grace."""
    return dataclasses.replace(
        CTX, clock_ms=clock_ms, live_window_ms=30_000, evidence_grace_ms=5_000
    )
