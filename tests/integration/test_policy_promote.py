"""`modstream policy promote` on the real broker, no Flink job: a prefixed deployment's topics,
an active and a shadow version pushed with `modstream policy push`, synthetic decisions, shadow
decisions and index entries; the gate refuses past the threshold, a forced promotion records
its reason, and one within the threshold becomes the active version."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from modstream.core import topics
from modstream.core.config import Settings
from modstream.policy.store import verify
from modstream.stack import deployments
from modstream.testing.policies import global_document
from modstream.testing.stack import Kafka, modstream
from modstream.trust.keyring import Keyring
from modstream.trust.two_person import promoter_key_verifies

pytestmark = pytest.mark.integration

WANTED = ("policy.rules", "moderation.decisions", "moderation.shadow", "moderation.index")
SURFACES = ("public_post", "comment", "dm", "profile", "comment")


def decision(
    content_id: str, outcome: str, policy_version: int, ts: int, *, shadow: bool = False
) -> dict[str, Any]:
    """A moderation.decisions (or .shadow) record as the job writes one (schema-valid)."""
    record: dict[str, Any] = {
        "decision_id": f"d-{content_id}-{policy_version}",
        "content_id": content_id,
        "content_version": 1,
        "decision_revision": 2,
        "outcome": outcome,
        "reasons": ["sexual_content"] if outcome == "BLOCK" else [],
        "matched_rules": ["nsfw-block-public"] if outcome == "BLOCK" else [],
        "policy_id": "global",
        "policy_version": policy_version,
        "evidence": [],
        "completeness": {"required": 1, "received": 1, "unknown": []},
        "trigger": "evidence",
        "state": "blocked" if outcome == "BLOCK" else "approved",
        "ts": ts,
    }
    if shadow:
        record["shadow"] = True
    return record


def index_entry(content_id: str, index: int, ts: int) -> dict[str, Any]:
    return {
        "content_id": content_id,
        "content_version": 1,
        "decision_revision": 2,
        "outcome": "ALLOW",
        "state": "approved",
        "policy_id": "global",
        "policy_version": 1,
        "surface": SURFACES[index % len(SURFACES)],
        "region": "DE" if index % 2 else "US",
        "modality": "image",
        "detectors": ["nsfw_image"],
        "human": False,
        "upload_ts": ts,
        "ts": ts,
    }


def produce_round(
    kafka: Kafka, names: dict[str, str], tag: str, *, active: int, shadow: int, changed: int
) -> None:
    """50 content versions decided ALLOW by `active`; `shadow` BLOCKs the first `changed`."""
    ts = int(time.time() * 1000) - 60_000
    ids = [f"{tag}-{i}" for i in range(50)]

    def send(topic: str, values: list[dict[str, Any]]) -> None:
        kafka.produce(
            names[topic], [(v["content_id"], json.dumps(v).encode("utf-8")) for v in values]
        )

    send("moderation.decisions", [decision(c, "ALLOW", active, ts) for c in ids])
    send(
        "moderation.shadow",
        [
            decision(c, "BLOCK" if i < changed else "ALLOW", shadow, ts, shadow=True)
            for i, c in enumerate(ids)
        ],
    )
    send("moderation.index", [index_entry(c, i, ts) for i, c in enumerate(ids)])


def test_promote_refuses_past_the_threshold_forces_with_a_reason_and_accepts_within(
    stack: Settings, kafka: Kafka, tmp_path: Path
) -> None:
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    names = deployments.topic_names(prefix)
    specs = [dataclasses.replace(s, name=names[s.name]) for s in topics.TOPICS if s.name in WANTED]
    topics.create_topics(stack.bootstrap_servers, specs, say=lambda _: None)
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"alice": "alice-key", "bob": "bob-key"}))
    env = {
        **os.environ,
        "MODSTREAM_POLICY_KEY": "it-deploy-key",
        "MODSTREAM_KEYS_FILE": str(keys),
        "MODSTREAM_REQUIRE_APPROVAL": "1",
        "MODSTREAM_POLICY_AUTHOR": "alice",
    }
    approvals = tmp_path / "approvals"
    broker = ["--bootstrap-servers", stack.bootstrap_servers]
    on_topic = [*broker, "--topic", names["policy.rules"]]
    deployment = [*broker, "--prefix", prefix]

    def run(*args: str) -> tuple[int, str]:
        done = modstream(env, *args, timeout_s=120)
        return done.returncode, done.stdout + done.stderr

    def write(version: int) -> str:
        document = global_document(version)
        path = tmp_path / f"v{version}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return str(path)

    def approve(version: int) -> None:
        code, out = run(
            "policy", "approve", str(version), "--approver", "bob",
            "--file", write(version), "--approvals", str(approvals),
        )  # fmt: skip
        assert code == 0, out

    approve(1)
    first = ["--approvals", str(approvals), "--reason", "first version: nothing to compare"]
    code, out = run("policy", "push", write(1), *first, *on_topic)
    assert code == 0, out
    code, out = run("policy", "push", write(2), "--mode", "shadow", *on_topic)
    assert code == 0 and "active v1, shadow v2" in out, out
    produce_round(kafka, names, "round1", active=1, shadow=2, changed=5)

    # No decisions in the window: nothing to compare, no promotion.
    code, out = run("policy", "promote", "2", "--since", "2100-01-01", *deployment)
    assert code == 1 and "nothing to compare" in out, out
    code, out = run("policy", "promote", "1", *deployment)
    assert code == 1 and "global v1 is already the active version" in out, out

    # 5 of 50 changed: 10% is past the default 2%.
    code, out = run("policy", "promote", "2", *deployment)
    assert code == 1, out
    assert "changed outcomes: 5 of 50 (10.00%, limit 2.00%)" in out
    assert "new BLOCKs: 5 (round1-0@1, round1-1@1, round1-2@1, round1-3@1, round1-4@1)" in out
    assert "by transition: ALLOW->BLOCK 5" in out
    assert "by surface: comment 2/20, dm 1/10, profile 1/10, public_post 1/10" in out
    assert "refused: global v2 changes 5 of 50 outcomes (10.00%), above the limit 2.00%" in out
    code, out = run("policy", "show", *on_topic)
    assert "global: active v1, shadow v2" in out, out
    # A limit of 10% lets it through in a dry run; --force needs a reason; approvals as push.
    code, out = run("policy", "promote", "2", "--max-changed", "0.1", "--dry-run", *deployment)
    assert code == 0 and "dry run: would promote global v2" in out, out
    code, out = run("policy", "promote", "2", "--force", *deployment)
    assert code == 1 and "--force needs --reason TEXT" in out, out
    forced = ["--force", "--reason", "incident 42: block now", "--by", "carol"]
    # --by is whoever holds the key: on a machine without carol's key, no promotion as carol.
    alone = {k: v for k, v in env.items() if k != "MODSTREAM_SIGNING_DEV_SECRET"}
    done = modstream(alone, "policy", "promote", "2", *forced, *deployment, timeout_s=120)
    assert done.returncode == 1 and "no key for 'carol' to sign the activation" in done.stderr
    code, out = run("policy", "promote", "2", *forced, "--approvals", str(approvals), *deployment)
    assert code == 1 and "has no approval from someone other than its author" in out, out
    approve(2)
    code, out = run("policy", "promote", "2", *forced, "--approvals", str(approvals), *deployment)
    assert code == 0, out
    assert "promoted global v2 to active, FORCED by carol (incident 42: block now)" in out
    assert "global: active v2 (since ts" in out

    # A new shadow v3 changing 1 of 50 (2%, at the limit) is promoted.
    code, out = run("policy", "push", write(3), "--mode", "shadow", *on_topic)
    assert code == 0 and "active v2, shadow v3" in out, out
    produce_round(kafka, names, "round2", active=2, shadow=3, changed=1)
    approve(3)
    code, out = run("policy", "promote", "3", "--approvals", str(approvals), *deployment)
    assert code == 0, out
    assert "changed outcomes: 1 of 50 (2.00%, limit 2.00%)" in out
    assert "decided by the active side only: 50 (round1-0@1" in out  # round 1 had no v3
    assert "promoted global v3 to active, within the limit" in out
    code, out = run("policy", "show", "--history", *on_topic)
    assert code == 0 and "global: active v3 (since ts" in out, out
    assert "FORCED past the limit by carol: incident 42: block now" in out
    assert "promoted from shadow by alice: 1 of 50 outcomes changed (2.00%, limit 2.00%)" in out

    records = [json.loads(r.value) for r in kafka.read(names["policy.rules"])]
    assert [(r["version"], r["mode"]) for r in records] == [
        (1, "active"), (2, "shadow"), (2, "active"), (3, "shadow"), (3, "active"),
    ]  # fmt: skip
    assert all(verify(r, b"it-deploy-key") for r in records)
    promoted = records[2]["promotion"]
    assert (promoted["forced"], promoted["reason"], promoted["by"]) == (
        True,
        "incident 42: block now",
        "carol",
    )
    assert (promoted["changed"], promoted["compared"], promoted["max_changed"]) == (5, 50, 0.02)
    # Signed by carol's own key (a derived one here), not by anyone else's.
    people = Keyring.from_env(env)
    assert promoter_key_verifies(promoted, people)
    assert not promoter_key_verifies(dict(promoted, by="bob"), people)
    assert all(r["authorship"]["author"] == "alice" for r in records)
    assert records[4]["promotion"]["forced"] is False
    assert records[2]["document"] == records[1]["document"]
