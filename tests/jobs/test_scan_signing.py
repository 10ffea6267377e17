"""The scan job signs the results it produces with the detector's key (contract v1.1)."""

from __future__ import annotations

import json

from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import handle_batch
from modstream.testing.scans import Counting, request
from modstream.trust.signing import AUTHORITY_TOPICS, Keyring, check

KEYRING = Keyring(dev_secret=b"scan-secret", required=frozenset(AUTHORITY_TOPICS))


def results(config: ScanConfig) -> list[dict[str, object]]:
    rows = [("scan.requests.text", "c-a", json.dumps(request("a", "fine")))]
    handled = handle_batch(config, rows, 1_764_460_800_000, lambda name: Counting())
    return [
        json.loads(value)
        for topic, value in zip(handled.topics, handled.values, strict=True)
        if topic == config.physical("detector.results")
    ]


def test_results_carry_the_detectors_signature() -> None:
    [result] = results(ScanConfig(keyring=KEYRING))
    assert result["detector"] == "offensive_text" and "signature" in result
    assert check("detector.results", result, KEYRING) is None
    other = Keyring(dev_secret=b"another deployment", required=frozenset(AUTHORITY_TOPICS))
    assert check("detector.results", result, other) is not None


def test_without_keys_results_are_unsigned() -> None:
    [result] = results(ScanConfig(keyring=Keyring()))
    assert "signature" not in result
