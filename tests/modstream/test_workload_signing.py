"""The generated workload leaves signed: every authority record verifies with its producer's
key in the deployment's keyring, and nothing else changes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from modstream.demo.workload import for_kafka, generate, sign_lines, write
from modstream.trust.signing import AUTHORITY_TOPICS, Keyring, check

KEYRING = Keyring(dev_secret=b"workload-secret", required=frozenset(AUTHORITY_TOPICS))


def test_every_authority_record_is_signed_and_verifies() -> None:
    lines = generate(seed=5, versions=40, malformed=False)
    signed = sign_lines(lines, KEYRING)
    kinds = Counter(line["topic"] for line in signed if line["topic"] in AUTHORITY_TOPICS)
    assert set(kinds) == set(AUTHORITY_TOPICS)  # evidence, reviews, appeals and a bank entry
    for line in signed:
        if line["topic"] in AUTHORITY_TOPICS:
            assert check(line["topic"], line["value"], KEYRING) is None
    # Other topics and the order of lines are unchanged; the generated lines are not touched.
    assert [line["topic"] for line in signed] == [line["topic"] for line in lines]
    others = [line for line in lines if line["topic"] not in AUTHORITY_TOPICS]
    assert others == [line for line in signed if line["topic"] not in AUTHORITY_TOPICS]
    unsigned = [line["value"] for line in lines if line["topic"] in AUTHORITY_TOPICS]
    assert not any("signature" in value for value in unsigned)


def test_a_line_that_already_carries_a_signature_is_sent_as_it_is() -> None:
    forged = {
        "topic": "hash.bank",
        "value": {"event_id": "hb", "bank": "b", "hash": "0" * 64, "signature": "hmac-sha256:0"},
    }
    assert sign_lines([forged], KEYRING) == [forged]
    not_json = {"topic": "detector.results", "value": "not json"}
    assert sign_lines([not_json], KEYRING) == [not_json]


def test_kafka_records_and_replay_files_are_signed(tmp_path: Path) -> None:
    lines = generate(seed=6, versions=25, malformed=True)
    grouped = for_kafka(lines, {"review.decisions": "p.review.decisions"}, KEYRING)
    reviews = [json.loads(value) for _, value in grouped["p.review.decisions"]]
    assert reviews and all(check("review.decisions", r, KEYRING) is None for r in reviews)
    path = tmp_path / "events.jsonl"
    write(lines, path, KEYRING)
    written = [json.loads(text) for text in path.read_text().splitlines()]
    evidence = [w["value"] for w in written if w["topic"] == "detector.results"]
    # The malformed one (an upload sent as evidence) names no detector: left unsigned.
    assert sum("signature" not in e for e in evidence) == 1
    assert all(check("detector.results", e, KEYRING) is None for e in evidence if "detector" in e)


def test_without_keys_nothing_is_signed() -> None:
    lines = generate(seed=5, versions=25, malformed=False)
    assert sign_lines(lines, Keyring()) == lines
