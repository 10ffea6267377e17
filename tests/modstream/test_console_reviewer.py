"""The demo reviewer: an account whose printed password logs in, and a grant of every queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modstream.console.accounts import Accounts
from modstream.demo.console_reviewer import DEMO_REVIEWER, demo_reviewer
from modstream.testing.records import T0


def test_the_printed_login_works_and_the_reviewer_is_granted_every_queue(tmp_path: Path) -> None:
    grants: list[dict[str, Any]] = []
    path = tmp_path / "accounts.json"
    lines = demo_reviewer(path, "demo-1a2b", grants.append, "lead-1", T0)
    password = lines[1].rsplit("password ", 1)[1]
    assert Accounts.load(path).authenticate(DEMO_REVIEWER, password)
    assert "--prefix demo-1a2b" in lines[0] and "http://127.0.0.1:8800/" in lines[1]
    [grant] = grants
    assert (grant["reviewer_id"], grant["queues"], grant["granted_by"], grant["ts"]) == (
        DEMO_REVIEWER, ["*"], "lead-1", T0,
    )  # fmt: skip
