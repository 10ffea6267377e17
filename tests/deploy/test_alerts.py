"""deploy/prometheus/alerts.yaml checked and proven by Prometheus's own `promtool` (Debian's
`prometheus` package, installed by `make setup`): the rules parse, and every alert fires on the
series of deploy/prometheus/alerts.test.yaml (alerts.day.test.yaml for those comparing against
the day before) that cross it and stays quiet on those that just miss its threshold or its
`for`. No stack, no JVM."""

from __future__ import annotations

import re
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
ALERT_TESTS = (PROMETHEUS / "alerts.test.yaml", PROMETHEUS / "alerts.day.test.yaml")


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


def test_the_scrape_configuration_loads_the_rules() -> None:
    checked = promtool("check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 rule files found" in checked.stdout


def test_every_alert_fires_and_stays_quiet_as_its_cases_say() -> None:
    tested = promtool("test", "rules", *(str(path) for path in ALERT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def alert_rules() -> list[dict[str, Any]]:
    """The alerting rules of every group (the recording rules they read are not alerts)."""
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_recording_rules_live_in_groups_of_their_own() -> None:
    """Alerts in `modstream`, recording rules (score drift) in their own groups, so an alert
    reads what a recording group wrote at its last evaluation, never half of one."""
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    assert groups[0]["name"] == "modstream"
    assert all("alert" in rule for rule in groups[0]["rules"])
    recorded = [rule["record"] for group in groups[1:] for rule in group["rules"]]
    assert "modstream:detector_score_psi:1h" in recorded
    assert all("alert" not in rule for group in groups[1:] for rule in group["rules"])


def test_every_alert_has_a_case_where_it_fires_and_one_where_it_stays_quiet() -> None:
    rules = alert_rules()
    cases: list[dict[str, Any]] = []
    for path in ALERT_TESTS:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert document["rule_files"] == [ALERTS.name], path.name
        cases += [case for test in document["tests"] for case in test.get("alert_rule_test", [])]
    seen: dict[str, set[bool]] = defaultdict(set)
    for case in cases:
        seen[case["alertname"]].add(bool(case.get("exp_alerts")))
    for rule in rules:
        assert seen[rule["alert"]] == {True, False}, rule["alert"]
        _assert_firing_cases_name_the_rules_labels(rule, cases)
    assert set(seen) == {rule["alert"] for rule in rules}


def _assert_firing_cases_name_the_rules_labels(
    rule: dict[str, Any], cases: list[dict[str, Any]]
) -> None:
    """Each expected alert lists the rule's own labels and every annotation it has."""
    for case in cases:
        if case["alertname"] != rule["alert"]:
            continue
        for alert in case.get("exp_alerts") or []:
            assert rule["labels"].items() <= alert["exp_labels"].items(), rule["alert"]
            assert set(alert["exp_annotations"]) == set(rule["annotations"]), rule["alert"]


def test_every_recording_rule_has_a_case_that_computes_it() -> None:
    """The quality rates (group modstream-quality) and the score drift's PSI (group
    modstream-score-drift) are proven by promql_expr_test cases: each recording rule is read by
    a case's expression, or by a recording rule that is (the PSI's case proves the shares and
    bucket counts it is computed from)."""
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    rules = {
        rule["record"]: rule["expr"]
        for group in groups
        for rule in group["rules"]
        if "record" in rule
    }
    recorded = set(rules)
    assert recorded >= {
        "modstream:appeal_rate:1h",
        "modstream:overturn_rate:1h",
        "modstream:detector_score_psi:1h",
    }
    exprs = [
        case["expr"]
        for path in ALERT_TESTS
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]
        for case in test.get("promql_expr_test", [])
    ]
    covered = {name for name in recorded if any(_reads(expr, name) for expr in exprs)}
    while grown := {
        name
        for name in recorded - covered
        if any(_reads(rules[reader], name) for reader in covered)
    }:
        covered |= grown
    assert recorded <= covered, sorted(recorded - covered)


def _reads(expr: str, name: str) -> bool:
    """Whether the PromQL `expr` reads the series `name` (not one whose name extends it)."""
    return re.search(rf"{re.escape(name)}(?![\w:])", expr) is not None
