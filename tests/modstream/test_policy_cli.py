"""`modstream policy` commands that need no broker: validate, diff, sign, approve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from modstream.cli.main import main
from modstream.ops.policy_service import valid_approvals
from modstream.policy.store import verify
from modstream.testing.policies import GLOBAL_YAML, global_document


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "deploy-key")
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps({"alice": "alice-key", "bob": "bob-key"}))
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys_file))
    return keys_file


def write(tmp_path: Path, name: str, document: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_validate_accepts_the_shipped_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "validate", str(GLOBAL_YAML)]) == 0
    assert "global v1 is valid (12 rules)" in capsys.readouterr().out


def test_validate_lists_every_error_naming_its_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = global_document(2)
    document["rules"][0]["when"] = "score('media_check') >= 0.5"
    document["rules"][3]["outcome"] = "EXPLODE"
    path = write(tmp_path, "bad.yaml", document)
    not_yaml = tmp_path / "broken.yaml"
    not_yaml.write_text("rules: [unclosed")
    assert main(["policy", "validate", str(path), str(not_yaml)]) == 1
    out = capsys.readouterr().out
    assert "rule 'malware' (rules[0]).when: line 1, column 1: score() takes 2 arguments" in out
    assert "rule 'nsfw-block-minors' (rules[3]).outcome" in out
    assert "broken.yaml: cannot read YAML" in out


def test_diff_prints_rule_level_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = global_document(2)
    new["rules"] = new["rules"][1:]
    assert main(["policy", "diff", str(GLOBAL_YAML), str(write(tmp_path, "v2.yaml", new))]) == 0
    assert capsys.readouterr().out.strip() == "- malware"


def test_sign_prints_a_record_that_verifies(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "sign", str(GLOBAL_YAML), "--author", "alice", "--ts", "5"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert verify(record, b"deploy-key")
    assert (record["version"], record["mode"], record["ts"], record["author"]) == (
        1,
        "active",
        5,
        "alice",
    )


def test_sign_without_the_deployment_key_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MODSTREAM_POLICY_KEY", raising=False)
    assert main(["policy", "sign", str(GLOBAL_YAML)]) == 1
    assert "MODSTREAM_POLICY_KEY is not set" in capsys.readouterr().err


def test_approvals_count_only_for_someone_else_with_a_valid_own_signature(
    keys: Path, tmp_path: Path
) -> None:
    approvals = tmp_path / "approvals"
    document = global_document(1)
    assert (
        main(
            [
                "policy",
                "approve",
                "1",
                "--approver",
                "alice",
                "--file",
                str(GLOBAL_YAML),
                "--approvals",
                str(approvals),
            ]
        )
        == 0
    )
    assert valid_approvals(document, "alice", approvals) == []  # the author's own approval
    assert [a["approver"] for a in valid_approvals(document, "carol", approvals)] == ["alice"]
    assert (
        main(
            [
                "policy",
                "approve",
                "1",
                "--approver",
                "bob",
                "--file",
                str(GLOBAL_YAML),
                "--approvals",
                str(approvals),
            ]
        )
        == 0
    )
    assert [a["approver"] for a in valid_approvals(document, "alice", approvals)] == ["bob"]
    # A forged approval (signed with the wrong key) and one for another document do not count.
    forged = json.loads((approvals / "global-v1-bob.json").read_text())
    forged["approver"] = "alice"
    (approvals / "global-v1-alice.json").write_text(json.dumps(forged))
    assert valid_approvals(document, "bob", approvals) == []
    changed = global_document(1, default="BLOCK")
    assert valid_approvals(changed, "alice", approvals) == []


def test_approve_refuses_a_version_the_file_does_not_hold(
    keys: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "policy",
                "approve",
                "9",
                "--approver",
                "bob",
                "--file",
                str(GLOBAL_YAML),
                "--approvals",
                str(tmp_path),
            ]
        )
        == 1
    )
    assert "holds version 1, not 9" in capsys.readouterr().err
