"""`modstream policy` and the two-person rule (issue 27, point 5), without a broker: the
author signs with their own key, `promote --by` is whoever holds the key that signs the
activation, and an active push without the promotion gate needs a recorded reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modstream.cli.main import main
from modstream.ops.policy_service import PolicyCliError, activation, authorship, promoter_key
from modstream.policy.store import PolicyStore, Rejected, sign
from modstream.testing.policies import GLOBAL_YAML, KEY, global_document
from modstream.trust.keyring import Keyring, SigningKey
from modstream.trust.signing import approval_record

DEPLOYMENT = Keyring(
    keys={
        "alice": SigningKey.of(b"alice-key", "author"),
        "bob": SigningKey.of(b"bob-key", "approver"),
        "carol": SigningKey.of(b"carol-key", "approver"),
    }
)


@pytest.fixture
def alice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """alice's machine: her own key only, no dev secret."""
    monkeypatch.delenv("MODSTREAM_SIGNING_DEV_SECRET", raising=False)
    monkeypatch.setenv("MODSTREAM_POLICY_KEY", "deploy-key")
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps({"alice": "alice-key"}))
    monkeypatch.setenv("MODSTREAM_KEYS_FILE", str(keys_file))
    return {"MODSTREAM_KEYS_FILE": str(keys_file)}


def test_push_active_without_a_reason_is_refused_before_anything_is_read(
    alice: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # The broker named does not exist: the refusal comes first.
    command = ["policy", "push", str(GLOBAL_YAML), "--bootstrap-servers", "127.0.0.1:1"]
    assert main([*command, "--mode", "active", "--author", "alice"]) == 1
    assert "--mode active skips the promotion gate" in capsys.readouterr().err
    assert main([*command, "--mode", "active", "--reason", "  ", "--author", "alice"]) == 1
    assert "give --reason TEXT" in capsys.readouterr().err


def test_sign_prints_the_authors_own_signature(
    alice: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["policy", "sign", str(GLOBAL_YAML), "--author", "alice", "--ts", "5"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["authorship"]["author"] == "alice"
    signed = tmp_path / "record.json"
    signed.write_text(json.dumps(record))
    assert main(["policy", "validate", str(signed)]) == 0
    assert "global v1 is valid" in capsys.readouterr().out
    # The same record naming bob as author (re-signed with the deployment key) is refused.
    record["author"] = "bob"
    record["signature"] = sign(record, b"deploy-key")
    signed.write_text(json.dumps(record))
    assert main(["policy", "validate", str(signed)]) == 1
    assert "is not the signature of the record's author" in capsys.readouterr().out
    # Nobody signs as an author whose key is not on this machine.
    assert main(["policy", "sign", str(GLOBAL_YAML), "--author", "bob"]) == 1
    assert "no key for 'bob' to sign as the author (role author)" in capsys.readouterr().err


def test_promote_by_someone_whose_key_is_not_here_is_refused(
    alice: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "promote", "2", "--by", "carol"]) == 1
    assert "no key for 'carol' to sign the activation" in capsys.readouterr().err
    assert promoter_key("alice") == b"alice-key"


def test_a_promotion_signed_with_someone_elses_key_is_refused_by_the_job(
    tmp_path: Path,
) -> None:
    """alice's key filed under carol's name signs a promotion `--by carol`: the job, which
    holds carol's real key, refuses it; by alice herself it is accepted."""
    document = global_document(2)
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps({"alice": "alice-key", "carol": "alice-key"}))
    env = {"MODSTREAM_KEYS_FILE": str(keys_file)}
    fields = {"from_mode": "push", "forced": True, "reason": "hotfix"}

    def record(by: str) -> dict[str, object]:
        body: dict[str, object] = {
            "event_id": f"e-{by}",
            "policy_id": "global",
            "version": 2,
            "mode": "active",
            "author": "alice",
            "ts": 1,
            "document": document,
            "authorship": authorship(document, "alice", 1, env),
            "approvals": [approval_record(document, "bob", b"bob-key", 1)],
            "promotion": activation(document, {**fields, "by": by}, env),
        }
        body["signature"] = sign(body, KEY)
        return body

    with pytest.raises(Rejected, match="field promotion does not verify") as caught:
        PolicyStore(DEPLOYMENT).apply(record("carol"), KEY)
    assert caught.value.error_class == "policy"
    assert PolicyStore(DEPLOYMENT).apply(record("alice"), KEY)


def test_the_cli_signs_nothing_for_an_author_without_a_key(alice: dict[str, str]) -> None:
    with pytest.raises(PolicyCliError, match="no key for 'dave'"):
        authorship(global_document(1), "dave", 1)
