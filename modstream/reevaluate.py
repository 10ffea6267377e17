"""`modstream reevaluate`: ask the moderation job to re-decide content versions on their stored
evidence under the current policy, without any new detector call.

PyFlink has no `applyToKeyedState`, so re-evaluation goes through the job's input: this command
selects the affected versions from the decision stream (their latest decision was made under an
older policy version) and produces `moderation.reevaluate` records at a bounded rate, so live
traffic keeps priority. Event ids are deterministic (`reeval-<policy>-v<N>-<content>-<version>`):
running it twice re-decides nothing twice. A record on the decision or upload stream that is
not valid is skipped with a warning that counts it (modstream/kafkaio.py), never a crash.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from modstream import kafkaio


@dataclass(frozen=True)
class Selection:
    policy_id: str
    policy_version: int
    since_ts: int = 0
    surface: str | None = None
    region: str | None = None


def select(
    decisions: list[dict[str, Any]],
    uploads: dict[tuple[str, int], dict[str, Any]],
    selection: Selection,
) -> list[tuple[str, int]]:
    """(content_id, content_version) whose latest decision predates the policy version."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for decision in decisions:
        key = (decision["content_id"], decision["content_version"])
        if key not in latest or decision["decision_revision"] > latest[key]["decision_revision"]:
            latest[key] = decision
    chosen = []
    for key, decision in sorted(latest.items()):
        if decision["policy_id"] != selection.policy_id or decision["state"] == "deleted":
            continue
        if decision["policy_version"] >= selection.policy_version:
            continue
        if decision["ts"] < selection.since_ts:
            continue
        facts = uploads.get(key, {})
        if selection.surface and facts.get("surface") != selection.surface:
            continue
        if selection.region and facts.get("region") != selection.region:
            continue
        chosen.append(key)
    return chosen


def requests(
    chosen: list[tuple[str, int]], selection: Selection, ts: int
) -> Iterator[tuple[str, bytes]]:
    for content_id, content_version in chosen:
        record = {
            "event_id": f"reeval-{selection.policy_id}-v{selection.policy_version}-"
            f"{content_id}-{content_version}",
            "content_id": content_id,
            "content_version": content_version,
            "reason": f"policy {selection.policy_id} v{selection.policy_version}",
            "ts": ts,
        }
        yield content_id, json.dumps(record).encode("utf-8")


def paced(
    items: Iterator[tuple[str, bytes]],
    rate_per_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[tuple[str, bytes]]:
    """Yield at most `rate_per_s` items a second."""
    interval = 1.0 / rate_per_s
    next_at = clock()
    for item in items:
        now = clock()
        if now < next_at:
            sleep(next_at - now)
        next_at = max(now, next_at) + interval
        yield item


def run(
    bootstrap: str,
    selection: Selection,
    *,
    rate_per_s: float,
    ts: int,
    decisions_topic: str = "moderation.decisions",
    versions_topic: str = "content.versions",
    target_topic: str = "moderation.reevaluate",
    dry_run: bool = False,
    say: Callable[[str], None] = print,
) -> int:
    def warn(text: str) -> None:
        say(f"reevaluate: {text}")

    decisions = kafkaio.read_values(
        bootstrap, decisions_topic, schema="moderation.decisions", timeout_s=120, warn=warn
    )
    uploads: dict[tuple[str, int], dict[str, Any]] = {}
    if selection.surface or selection.region:
        for value in kafkaio.read_values(
            bootstrap, versions_topic, schema="content.versions", timeout_s=120, warn=warn
        ):
            uploads[(value["content_id"], value["content_version"])] = value
    chosen = select(decisions, uploads, selection)
    say(
        f"reevaluate: {len(chosen)} content version(s) decided before "
        f"{selection.policy_id} v{selection.policy_version}"
    )
    if dry_run or not chosen:
        return 0
    sent = kafkaio.produce(
        bootstrap, target_topic, paced(requests(chosen, selection, ts), rate_per_s)
    )
    say(f"reevaluate: produced {sent} request(s) to {target_topic} at <= {rate_per_s:g}/s")
    return 0
