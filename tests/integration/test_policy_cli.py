"""`modstream policy push / show / rollback / pause` against the real broker."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from modstream.cli.main import main
from modstream.core import kafkaio
from modstream.core.config import Settings
from modstream.policy.store import verify
from modstream.testing.policies import global_document, version_record
from modstream.testing.stack import Kafka

pytestmark = pytest.mark.integration


def test_push_show_rollback_pause_on_the_broker(
    stack: Settings,
    kafka: Kafka,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = f"it-{uuid.uuid4().hex[:10]}.policy.rules"
    kafka.create_topics([topic], partitions=1)
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"alice": "alice-key", "bob": "bob-key"}))
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "deploy-key")
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys))
    monkeypatch.setenv("MODSTREAM_REQUIRE_APPROVAL", "1")
    approvals = tmp_path / "approvals"
    files = {}
    for version in (1, 2, 3):
        document = global_document(version)
        if version == 3:
            document["rules"][2]["when"] = document["rules"][2]["when"].replace("0.95", "0.9")
        files[version] = tmp_path / f"v{version}.yaml"
        files[version].write_text(yaml.safe_dump(document, sort_keys=False))
    broker = ["--bootstrap-servers", stack.bootstrap_servers, "--topic", topic]

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    # Active without the promotion gate needs a reason, recorded and signed by its author.
    code, out = run(
        "policy", "push", str(files[1]), "--author", "alice", "--approvals", str(approvals), *broker
    )
    assert code == 1 and "--mode active skips the promotion gate" in out, out
    reason = ["--reason", "no shadow in this test"]
    # Active needs an approval from someone other than the author.
    approvals_dir = ["--approvals", str(approvals), *reason]
    code, out = run("policy", "push", str(files[1]), "--author", "alice", *approvals_dir, *broker)
    assert code == 1 and "no approval from someone other than its author 'alice'" in out
    code, out = run(
        "policy",
        "approve",
        "1",
        "--approver",
        "alice",
        "--file",
        str(files[1]),
        "--approvals",
        str(approvals),
    )
    code, out = run("policy", "push", str(files[1]), "--author", "alice", *approvals_dir, *broker)
    assert code == 1, "the author's own approval must not count"
    run(
        "policy",
        "approve",
        "1",
        "--approver",
        "bob",
        "--file",
        str(files[1]),
        "--approvals",
        str(approvals),
    )
    code, out = run(
        "policy",
        "push",
        str(files[1]),
        "--author",
        "alice",
        "--approvals",
        str(approvals),
        "--ts",
        "1000",
        *reason,
        *broker,
    )
    assert code == 0, out
    assert "global: active v1 (since ts 1000)" in out

    code, out = run(
        "policy",
        "push",
        str(files[2]),
        "--mode",
        "shadow",
        "--author",
        "alice",
        "--approvals",
        str(approvals),
        "--ts",
        "2000",
        *broker,
    )
    assert code == 0, out
    assert "active v1, shadow v2" in out
    # Skipping the command's approval check does not get past the job's own (PolicyStore).
    code, out = run(
        "policy",
        "push",
        str(files[3]),
        "--author",
        "bob",
        "--ts",
        "3000",
        "--approvals",
        str(approvals),
        "--no-require-approval",
        *reason,
        *broker,
    )
    assert code == 1 and "the moderation job would refuse global v3 (policy)" in out, out
    approve = ["--file", str(files[3]), "--approvals", str(approvals)]
    assert run("policy", "approve", "3", "--approver", "alice", *approve)[0] == 0
    code, out = run(
        "policy",
        "push",
        str(files[3]),
        "--author",
        "bob",
        "--ts",
        "3000",
        "--approvals",
        str(approvals),
        *reason,
        *broker,
    )
    assert code == 0, out
    assert "global: active v3 (since ts 3000)" in out
    code, out = run(
        "policy",
        "push",
        str(files[2]),
        "--author",
        "alice",
        "--mode",
        "shadow",
        "--approvals",
        str(approvals),
        *broker,
    )
    assert code == 1 and "already on" in out

    # A record signed with another key lands on the topic but is ignored, and said so.
    forged = version_record(global_document(9), key=b"mallory", ts=3500)
    kafkaio.produce(stack.bootstrap_servers, topic, [("global", json.dumps(forged).encode())])

    code, out = run("policy", "show", "--history", *broker)
    assert code == 0
    assert "global: active v3 (since ts 3000)" in out
    assert "v1 active  author alice  approved by bob at" in out
    assert "v2 shadow  author alice  approved by none" in out
    assert "pushed active without the promotion gate by bob: no shadow in this test" in out
    assert "~ nsfw-block-public: threshold score('nsfw_image', 'nsfw') >= 0.95 -> 0.9" in out
    assert "1 record(s) on" in out and "does not verify" in out

    code, out = run("policy", "rollback", "1", "--ts", "4000", *broker)
    assert code == 0, out
    assert "global: active v1 (since ts 4000)" in out
    code, out = run("policy", "rollback", "3", *broker)
    assert code == 1 and "not older than the active v1" in out
    code, out = run("policy", "pause", "--ts", "5000", *broker)
    assert code == 0 and "PUBLICATION PAUSED" in out
    code, out = run("policy", "resume", "--ts", "6000", *broker)
    assert code == 0 and "PAUSED" not in out

    records = kafkaio.read_to_end(stack.bootstrap_servers, topic)
    assert [r.key for r in records] == [b"global"] * 7
    values = [json.loads(r.value) for r in records]
    assert [verify(v, b"deploy-key") for v in values] == [
        v["event_id"] != forged["event_id"] for v in values
    ]
