"""Every timer chain ends (issue 12, item 7): the version operator's timers when event time
jumps to the end, and `modstream replay` of a workload in which an author is suspended without
end (the sanctions chain: tests/operators/test_sanctions.py).

At the end of input the watermark jumps to the end of time, so every armed timer fires; a timer
that re-arms itself a fixed period later (the sanctions timer of a permanent suspension did,
every 90 days) then fires about a billion times and the replay never ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modstream.core.config import PROJECT_ROOT
from modstream.demo.workload import generate, write
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.records import T0, delete
from modstream.testing.versions import Version, image, image_evidence

END_OF_TIME = 2**63 - 1  # the watermark at the end of input

# 500 versions replay in about 40 s here; before the fix this workload never finished.
REPLAY_TIMEOUT_S = 300


def fire_to_the_end(version: Version, limit: int = 50) -> int:
    """Fire every timer the version's operator arms, in order, as Flink does when the watermark
    jumps to the end of time; fail past `limit` firings (a chain that does not end)."""
    fired = 0
    while due := sorted(version.timers):
        assert fired < limit, f"timer chain of the version operator still running: {due[:3]}"
        version.fire(due[0])
        armed_now = [timer for timer in version.timers if timer <= due[0]]
        assert armed_now == [], f"a timer armed at or before the one firing: {armed_now}"
        fired += 1
    return fired


def _uploaded(surface: str) -> Version:
    version = Version()
    version.upload(**image(surface=surface))
    return version


def _decided() -> Version:
    version = _uploaded("comment")
    for record in image_evidence("c-1", T0 + 1):
        version.send("detector.results", record)
    return version


def _deleted() -> Version:
    version = _decided()
    version.send("content.versions", delete("c-1", T0 + 5))
    return version


def _orphan_evidence() -> Version:
    version = Version()
    version.send("detector.results", image_evidence("c-9", T0)[0])
    return version


@pytest.mark.parametrize(
    "build",
    [
        _decided,
        lambda: _uploaded("comment"),  # provisional, evidence never comes
        lambda: _uploaded("public_post"),  # pending, evidence never comes
        _deleted,
        _orphan_evidence,
    ],
    ids=["decided", "provisional", "pending", "deleted", "orphan-evidence"],
)
def test_the_version_operators_timers_end_when_event_time_jumps_to_the_end(
    build: Callable[[], Version],
) -> None:
    """Deadline, provisional expiry and state TTL: a few firings, then nothing armed."""
    version = build()
    version.timers.add(END_OF_TIME)
    assert fire_to_the_end(version) <= 6
    assert version.timers == set()


@pytest.mark.integration
def test_a_replay_with_an_author_suspended_without_end_finishes(tmp_path: Path) -> None:
    events, out = tmp_path / "events.jsonl", tmp_path / "out"
    write(generate(seed=1, versions=500), events)
    command = [sys.executable, "-m", "modstream.cli.main", "replay", "--input", str(events)]
    command += ["--policy", str(GLOBAL_YAML), "--out", str(out), "--parallelism", "1"]
    try:
        result = subprocess.run(
            command,
            cwd=PROJECT_ROOT,
            env={**os.environ, "MODSTREAM_POLICY_KEY": "timer-chains-key"},
            capture_output=True,
            text=True,
            timeout=REPLAY_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"replay still running after {REPLAY_TIMEOUT_S} s: an endless timer chain")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    actions = [
        json.loads(line) for line in (out / "account.actions.jsonl").read_text().splitlines()
    ]
    permanent = [
        action
        for action in actions
        if action["sanction"] == "account_suspended" and "expires_ts" not in action
    ]
    assert permanent, "the workload must suspend an author without end to test the chain"
    suspended = {action["user_id"] for action in permanent}
    lifted = {a["user_id"] for a in actions if a["sanction"] == "sanction_lifted"}
    assert suspended - lifted, "a suspension without end must still hold at the end of input"
