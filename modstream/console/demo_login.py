"""A demo reviewer for the review console after `modstream demo` (issue 30): an account with a
fresh password, a lead's grant of every queue on the run's review.grants, and the lines that
say how to open the console on the run's topics. `modstream demo` is to call `demo_reviewer`
once its summary is printed (docs/REVIEW.md, "After the demo")."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.console.accounts import Accounts
from modstream.console.cli import DEFAULT_PORT
from modstream.review import grant_record

DEMO_REVIEWER = "demo-reviewer"


def demo_reviewer(
    accounts_path: Path,
    prefix: str,
    grant: Callable[[dict[str, Any]], None],
    lead: str,
    now_ms: int,
    dev_secret_variable: str = "MODSTREAM_SIGNING_DEV_SECRET=modstream-demo-signing",
) -> list[str]:
    """Add (or reset) the demo reviewer, `grant` it every queue from `now_ms` (`grant` signs
    with `lead`'s key and produces to the run's review.grants), and return what to print."""
    password = secrets.token_urlsafe(12)
    Accounts.load(accounts_path).with_reviewer(DEMO_REVIEWER, password).save(accounts_path)
    grant(grant_record(DEMO_REVIEWER, ["*"], lead, now_ms))
    return [
        f"review console: {dev_secret_variable} modstream review serve --prefix {prefix} "
        f"--accounts {accounts_path}",
        f"  then http://127.0.0.1:{DEFAULT_PORT}/  reviewer {DEMO_REVIEWER}, password {password}",
    ]
