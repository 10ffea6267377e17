"""deploy/prometheus/alerts.yaml checked and proven by Prometheus's own `promtool` (Debian's
`prometheus` package, installed by `make setup`): the rules parse, and every alert fires on the
series of deploy/prometheus/alerts.test.yaml that cross it and stays quiet on those that just
miss its threshold or its `for`. No stack, no JVM."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS / "alerts.yaml"
ALERTS_TEST = PROMETHEUS / "alerts.test.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: `make setup` installs it (Debian package prometheus)")
    return subprocess.run(
        [found, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_rules_parse() -> None:
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_fires_and_stays_quiet_as_its_cases_say() -> None:
    tested = promtool("test", "rules", str(ALERTS_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_case_where_it_fires_and_one_where_it_stays_quiet() -> None:
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"][0]["rules"]
    cases = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    assert cases["rule_files"] == [ALERTS.name]
    seen: dict[str, set[bool]] = defaultdict(set)
    for test in cases["tests"]:
        for case in test["alert_rule_test"]:
            seen[case["alertname"]].add(bool(case.get("exp_alerts")))
    for rule in rules:
        assert seen[rule["alert"]] == {True, False}, rule["alert"]
        _assert_firing_cases_name_the_rules_labels(rule, cases)
    assert set(seen) == {rule["alert"] for rule in rules}


def _assert_firing_cases_name_the_rules_labels(rule: dict[str, Any], cases: Any) -> None:
    """Each expected alert lists the rule's own labels and every annotation it has."""
    for test in cases["tests"]:
        for case in test["alert_rule_test"]:
            if case["alertname"] != rule["alert"]:
                continue
            for alert in case.get("exp_alerts") or []:
                assert rule["labels"].items() <= alert["exp_labels"].items(), rule["alert"]
                assert set(alert["exp_annotations"]) == set(rule["annotations"]), rule["alert"]
