"""A demo reviewer for the review console after `modstream demo` (issue 30): an account with a
fresh password, a lead's grant of every queue on the run's review.grants, and the lines that
say how to open the console on the run's topics. `modstream demo` calls `on_demo_run` once
its summary is printed (docs/REVIEW.md, "After the demo"). The demo's, not the console's: it
sets the console up from the demo's workload and keys (the console knows nothing of the demo)."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.console.accounts import Accounts
from modstream.console.cli import DEFAULT_PORT
from modstream.core.config import Settings
from modstream.demo import workload
from modstream.demo.deployment import Deployment
from modstream.review.queue import grant_record
from modstream.trust.signing import Keyring

DEMO_REVIEWER = "demo-reviewer"


def demo_reviewer(
    accounts_path: Path,
    prefix: str,
    grant: Callable[[dict[str, Any]], None],
    lead: str,
    now_ms: int,
    dev_secret_variable: str = "MODSTREAM_SIGNING_DEV_SECRET=modstream-demo-signing",
    raw_output_dir: Path | None = None,
) -> list[str]:
    """Add (or reset) the demo reviewer, `grant` it every queue from `now_ms` (`grant` signs
    with `lead`'s key and produces to the run's review.grants), and return what to print."""
    password = secrets.token_urlsafe(12)
    Accounts.load(accounts_path).with_reviewer(DEMO_REVIEWER, password).save(accounts_path)
    grant(grant_record(DEMO_REVIEWER, ["*"], lead, now_ms))
    return [
        f"review console: {dev_secret_variable} modstream review serve --prefix {prefix} "
        f"--accounts {accounts_path}"
        + (f" --raw-output-dir {raw_output_dir}" if raw_output_dir is not None else ""),
        f"  then http://127.0.0.1:{DEFAULT_PORT}/  reviewer {DEMO_REVIEWER}, password {password}",
    ]


def on_demo_run(
    settings: Settings,
    deployment: Deployment,
    keyring: Keyring,
    demo_secret: str,
    secret_variable: str = "MODSTREAM_SIGNING_DEV_SECRET",
) -> list[str]:
    """`demo_reviewer` for a demo run: the account in RUN_DIR/console/accounts.json, the grant
    signed by the workload's lead with the run's keyring and produced to the run's
    review.grants (the deployment's topic names). The dev secret the console
    needs is the one the run signed with (`secret_variable` in the environment, else the
    demo's, `demo_secret`)."""

    def grant(record: dict[str, Any]) -> None:
        line: workload.Line = {"topic": "review.grants", "value": record}
        workload.produce(settings.bootstrap_servers, [line], deployment.names, keyring)

    secret = os.environ.get(secret_variable) or demo_secret
    return demo_reviewer(
        settings.run_dir / "console" / "accounts.json",
        deployment.prefix,
        grant,
        workload.LEAD,
        int(time.time() * 1000),
        dev_secret_variable=f"{secret_variable}={secret}",
        # where the demo's scan job keeps what OCR read and speech said (modstream/demo/run.py)
        raw_output_dir=settings.run_dir / "demo" / "raw-output",
    )
