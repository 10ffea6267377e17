"""Secrets masked by value in every output (issue 27, point 10; modstream/core/redaction.py): known
secret values set everywhere a secret can go, then `config show`, the logs, DLQ rows and metric
labels scanned for them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from modstream.cli.main import main
from modstream.contract.dlq import dead_letter, is_redacted
from modstream.core import logs, redaction
from modstream.jobs.metrics import OperatorMetrics
from modstream.testing.flink import FakeMetricsContext as FakeContext

KEY_MATERIAL = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7secretkeyline"
SECRETS = {
    "sasl": "sasl-pass-4f1c9e",
    "keystore": KEY_MATERIAL,
    "key_password": "ssl-key-pass-82ad",
    "redis_query": "redis-query-pass-77b2",
    "redis_token": "redistoken0c5e1",
    "dev_secret": "dev-secret-9a3b77",
    "policy_key": "policy-key-5e6f01",
    "approver": "approver-key-d4c2aa",
    "keys_file": "reviewer-key-13ab9f",
    "aws": "aws-secret-6c7d8e",
}


@pytest.fixture
def secrets_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tmp_path / "keys.json"
    # The deployment's keys file (modstream/trust/keyring.py): an id to its role and key.
    keys.write_text(json.dumps({"alice": {"role": "reviewer", "key": SECRETS["keys_file"]}}))
    pem = f"-----BEGIN PRIVATE KEY-----\n{KEY_MATERIAL}\n-----END PRIVATE KEY-----"
    properties = {"ssl.keystore.key": pem, "ssl.key.password": SECRETS["key_password"]}
    for name, value in {
        "MODSTREAM_CONFIG": "none",
        "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": "broker.example:9093",
        "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "MODSTREAM_KAFKA__SASL_USERNAME": "modstream",
        "MODSTREAM_KAFKA__SASL_PASSWORD": SECRETS["sasl"],
        "MODSTREAM_KAFKA__PROPERTIES": json.dumps(properties),
        "MODSTREAM_REDIS__URL": f"redis://cache.example:6379/0?password={SECRETS['redis_query']}",
        # A second URL form, the token as the whole user-info (`redis://TOKEN@host`).
        "MODSTREAM_CONTENT_SERVICE_URL": f"redis://{SECRETS['redis_token']}@cache.example/1",
        "MODSTREAM_SIGNING_DEV_SECRET": SECRETS["dev_secret"],
        "MODSTREAM_POLICY_KEY": SECRETS["policy_key"],
        "MODSTREAM_KEY_BOB": SECRETS["approver"],
        "MODSTREAM_SIGNING_KEYS_FILE": str(keys),
        "AWS_SECRET_ACCESS_KEY": SECRETS["aws"],
    }.items():
        monkeypatch.setenv(name, value)


def leaked(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def everything() -> str:
    return " ".join(SECRETS.values()) + " " + json.dumps(SECRETS)


@pytest.mark.usefixtures("secrets_everywhere")
def test_config_show_masks_every_secret_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    shown = json.loads(out)
    assert leaked(out) == []
    assert shown["kafka"]["properties"]["ssl.keystore.key"] == redaction.MASK
    assert shown["redis"]["url"] == "redis://cache.example:6379/0?password=" + redaction.MASK
    assert shown["kafka"]["sasl_username"] == "modstream"  # not a secret: still shown


@pytest.mark.usefixtures("secrets_everywhere")
@pytest.mark.parametrize("as_json", [True, False])
def test_logs_mask_every_secret_value(as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(as_json, "INFO", command="test")
    log = logging.getLogger("modstream.test")
    log.warning("connecting with %s", everything())
    logs.get("modstream.test").info("client", config=SECRETS)
    try:
        raise ConnectionError(f"redis://{SECRETS['redis_token']}@cache.example refused")
    except ConnectionError:
        log.exception("redis down")
    err = capsys.readouterr().err
    assert "connecting with" in err and "redis down" in err and "ConnectionError" in err
    assert leaked(err) == []


@pytest.mark.usefixtures("secrets_everywhere")
def test_dlq_rows_keep_no_secret_value() -> None:
    raw = json.dumps({"event_id": "e-1", "token": SECRETS["policy_key"], "note": everything()})
    letter = dead_letter(
        "review.decisions", "c-1", raw, ValueError(f"bad key {SECRETS['approver']}"), ts=1
    )
    row = letter.model_dump_json()
    assert leaked(row) == []
    assert is_redacted(letter.raw) and "held a secret" in letter.message
    assert redaction.MASK in letter.message


@pytest.mark.usefixtures("secrets_everywhere")
def test_metric_labels_carry_no_secret_value() -> None:
    context = FakeContext()
    reporter = OperatorMetrics(context, "test")
    reporter.inc("review_tasks", queue=SECRETS["dev_secret"])
    reporter.inc("unknown_evidence", detector=f"x-{SECRETS['keystore']}")
    names = " ".join(context.group.made)
    assert leaked(names) == [] and names.count(redaction.MASK) == 2


def test_without_secrets_nothing_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODSTREAM_CONFIG", "none")
    for name in ("MODSTREAM_SIGNING_DEV_SECRET", "MODSTREAM_POLICY_KEY"):
        monkeypatch.delenv(name, raising=False)
    redactor = redaction.current()
    assert redactor.text("queue general, detector nsfw_image") == (
        "queue general, detector nsfw_image"
    )
