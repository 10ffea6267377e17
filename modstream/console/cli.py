"""`modstream review serve` and `modstream review add-reviewer`: the console's commands (they
parse and print; `Console`, `Accounts` and `build_app` do the work)."""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from modstream.console.accounts import ACCOUNTS_VARIABLE, AccountError, Accounts
from modstream.console.sessions import SECRET_VARIABLE, SessionCodec
from modstream.core.config import Settings

DEFAULT_PORT = 8800


def add_options(parser: argparse.ArgumentParser) -> None:
    """The console's options on `modstream review`."""
    parser.add_argument("--host", default="127.0.0.1", help="serve: address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="serve: HTTP port")
    parser.add_argument(
        "--accounts", type=Path, default=None,
        help=f"serve, add-reviewer: the accounts file (${ACCOUNTS_VARIABLE}, "
        "default RUN_DIR/console/accounts.json)",
    )  # fmt: skip
    parser.add_argument("--policy", type=Path, default=None, help="serve: the policy's reasons")
    parser.add_argument("--lease-ms", type=int, default=None, help="serve: how long a claim holds")
    parser.add_argument(
        "--raw-output-dir", type=Path, default=None,
        help="serve: the scan job's raw-output store (its --raw-output-dir), read for the "
        "words OCR read and speech said",
    )  # fmt: skip
    parser.add_argument(
        "--no-feed", action="store_true", help="serve: do not read review.tasks into the queue"
    )
    parser.add_argument(
        "--identity-header", default=None,
        help="serve: take the reviewer id from this header set by a trusted proxy",
    )  # fmt: skip
    parser.add_argument(
        "--trusted-proxy", action="append", default=[],
        help="serve: an address whose identity header is believed (repeatable)",
    )  # fmt: skip
    parser.add_argument("--secure-cookies", action="store_true", help="serve: behind TLS")
    parser.add_argument(
        "--lead", action="store_true", help="add-reviewer: mark the reviewer a lead (lead view)"
    )


def with_console(
    review: Callable[[argparse.Namespace, Settings], int],
) -> Callable[[argparse.Namespace, Settings], int]:
    """`modstream review`'s handler: the console's actions here, the others `review`'s own."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        if args.action == "serve":
            return serve(args, settings)
        if args.action == "add-reviewer":
            return add_reviewer(args, settings)
        return review(args, settings)

    return run


def accounts_path(args: argparse.Namespace, settings: Settings) -> Path:
    configured = args.accounts or os.environ.get(ACCOUNTS_VARIABLE)
    return Path(configured) if configured else settings.run_dir / "console" / "accounts.json"


def add_reviewer(args: argparse.Namespace, settings: Settings) -> int:
    """Add or reset a reviewer's password; read from the terminal, or one line of stdin."""
    if not args.task:
        print("modstream review add-reviewer: give the REVIEWER id", file=sys.stderr)
        return 2
    path = accounts_path(args, settings)
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.task}: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    try:
        accounts = Accounts.load(path).with_reviewer(args.task, password)
        (accounts.with_lead(args.task) if args.lead else accounts).save(path)
    except AccountError as error:
        print(f"modstream review add-reviewer: {error}", file=sys.stderr)
        return 1
    print(f"review add-reviewer: {args.task}{' (a lead)' if args.lead else ''} in {path}")
    return 0


def serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from modstream.console.service import Console, ConsoleConfig
    from modstream.console.web import WebConfig, build_app

    policy_path = args.policy or settings.project_root / "policy_rules" / "global.yaml"
    secret = os.environ.get(SECRET_VARIABLE, "").encode()
    if not secret:
        secret = secrets.token_bytes(32)
        print(f"review serve: no ${SECRET_VARIABLE}: sessions end when the console stops")
    config = ConsoleConfig(
        bootstrap_servers=args.bootstrap_servers or settings.bootstrap_servers,
        redis_url=settings.redis_url,
        media_root=settings.media_root,
        policy=yaml.safe_load(policy_path.read_text(encoding="utf-8")),
        prefix=args.prefix,
        feed=not args.no_feed,
        raw_output_dir=args.raw_output_dir,
    )
    if args.lease_ms:
        config.lease_ms = args.lease_ms
    console = Console(config, clock=lambda: int(time.time() * 1000))
    web = WebConfig(
        accounts=Accounts.load(accounts_path(args, settings)),
        codec=SessionCodec(secret),
        identity_header=args.identity_header,
        trusted_proxies=frozenset(args.trusted_proxy),
        secure_cookies=args.secure_cookies,
    )
    print(f"review serve: the review console on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(build_app(console, web), host=args.host, port=args.port, log_level="warning")
    return 0
