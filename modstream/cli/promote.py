"""`modstream policy promote` and `modstream policy backtest`: parse and print.

The work is modstream/ops/promotion.py (reading the topics, the gate, the activation, the replays)
and modstream/policy/compare.py (the comparison); registered by modstream/cli/policy.py.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from modstream.core.config import Settings
from modstream.ops import promotion
from modstream.ops.policy_service import (
    PolicyCliError,
    checked_document,
    describe,
    promoter_key,
    require_approval_default,
)
from modstream.policy.compare import ThresholdError, parse_share, percent, render
from modstream.stack import deployments

Say = Callable[[str], None]
DEFAULT_MAX_CHANGED = "2%"
DEFAULT_WINDOW = "24h"


def share(text: str) -> Fraction:
    """--max-changed: `2%` or `0.02`; argparse names the option and the value when it is bad."""
    try:
        return parse_share(text)
    except ThresholdError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def duration(text: str) -> int:
    try:
        return promotion.duration_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def iso_time(text: str) -> int:
    try:
        return promotion.iso_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def cmd_promote(args: argparse.Namespace, say: Say) -> int:
    settings = Settings.from_env()
    try:
        prefix = deployments.prefix_of(args, settings)
    except deployments.DeploymentError as error:
        raise PolicyCliError(str(error)) from None
    names = deployments.topic_names(prefix)
    topic = args.topic or names["policy.rules"]
    if not args.dry_run:
        promoter_key(args.by)  # refused before the comparison when --by's key is not here
    since = args.since if args.since is not None else int(time.time() * 1000) - args.window
    chosen = promotion.load_candidate(args.bootstrap_servers, topic, args.policy_id, args.version)
    active = f"v{chosen.active}" if chosen.active else "policy (a --policy file, not on the topic)"
    say(
        f"{chosen.policy_id} v{chosen.version} ({chosen.mode}) against the active {active}: "
        f"decisions since {promotion.iso(since)} "
        f"({names['moderation.shadow']} vs {names['moderation.decisions']})"
    )
    comparison = promotion.compare_live(args.bootstrap_servers, names, chosen, since)
    for line in render(comparison, args.max_changed):
        say(f"  {line}")
    forced = promotion.gate(
        comparison, chosen, args.max_changed, since=since, force=args.force, reason=args.reason
    )
    if args.dry_run:
        say(f"dry run: would promote {chosen.policy_id} v{chosen.version}" + forced * " (forced)")
        return 0
    record, after = promotion.activate(
        args.bootstrap_servers,
        topic,
        chosen,
        promotion.promotion_field(
            comparison,
            chosen,
            args.max_changed,
            since=since,
            by=args.by,
            forced=forced,
            reason=args.reason,
        ),
        approvals_dir=args.approvals,
        require_approval=args.require_approval,
    )
    how = f"FORCED by {args.by} ({args.reason.strip()})" if forced else "within the limit"
    name = f"{chosen.policy_id} v{chosen.version}"
    say(f"promoted {name} to active, {how} (event {record['event_id']})")
    say(describe(after.snapshot(chosen.policy_id), chosen.policy_id))
    return 0


def cmd_backtest(args: argparse.Namespace, say: Say) -> int:
    old, new = checked_document(args.old), checked_document(args.new)
    if old["policy_id"] != new["policy_id"]:
        raise PolicyCliError(
            f"{args.old} is policy {old['policy_id']!r}, {args.new} is {new['policy_id']!r}"
        )
    if not args.input.is_file():
        raise PolicyCliError(f"{args.input}: no such events file")
    started = time.monotonic()
    result = promotion.backtest(args.old, args.new, args.input, args.out)
    say(
        f"{old['policy_id']} v{old['version']} ({args.old}) -> v{new['version']} ({args.new}) "
        f"on {args.input}: replays {result.seconds['old']}s + {result.seconds['new']}s, "
        f"{time.monotonic() - started:.1f}s in all"
    )
    for side in ("old", "new"):
        if result.dlq[side]:
            classes = ", ".join(f"{name} {n}" for name, n in sorted(result.dlq[side].items()))
            say(f"  note: the {side} replay dead-lettered input ({classes})")
    if any("signature" in classes for classes in result.dlq.values()):
        say(
            "  note: replay requires signatures on every authority topic; unsigned history "
            "(the shipped sample) needs MODSTREAM_INSECURE_UNSIGNED_TOPICS=all"
        )
    for line in render(result.comparison, args.max_changed):
        say(f"  {line}")
    if args.max_changed is not None and not result.comparison.within(args.max_changed):
        raise PolicyCliError(
            f"{percent(result.comparison.fraction)} of outcomes change, above the limit "
            f"{percent(args.max_changed)}"
        )
    return 0


Action = Callable[..., argparse.ArgumentParser]  # policy_cli's (name, handler, help, broker)


def add_parsers(action: Action, author: str, approvals: Path) -> None:
    """promote and backtest, under `modstream policy`."""
    settings = Settings.from_env()
    sub = action(
        "promote",
        cmd_promote,
        "compare a shadow or canary version with the active one over a window and activate "
        "it when the share of changed outcomes is within --max-changed",
    )
    sub.add_argument("version", type=int)
    sub.add_argument("--policy-id", default="global")
    sub.add_argument(
        "--max-changed",
        type=share,
        default=share(DEFAULT_MAX_CHANGED),
        help="the largest share of changed outcomes that promotes: 2%% or 0.02 (default 2%%)",
    )
    when = sub.add_mutually_exclusive_group()
    when.add_argument(
        "--window",
        type=duration,
        default=duration(DEFAULT_WINDOW),
        help="decisions of the last 24h (default), 90m, 7d",
    )
    when.add_argument("--since", type=iso_time, help="ISO 8601 start of the window (UTC)")
    sub.add_argument("--force", action="store_true", help="promote past the limit (--reason)")
    sub.add_argument("--reason", help="why, recorded in the activation record")
    sub.add_argument(
        "--by",
        default=author,
        help="who promotes: signs the activation with their own key (role author or approver)",
    )
    sub.add_argument("--dry-run", action="store_true", help="print the diff, activate nothing")
    sub.add_argument("--approvals", type=Path, default=approvals)
    sub.add_argument(
        "--no-require-approval",
        dest="require_approval",
        action="store_false",
        default=require_approval_default(),
    )
    sub.add_argument("--bootstrap-servers", default=settings.bootstrap_servers)
    sub.add_argument("--topic", help="policy topic (default: the deployment's policy.rules)")
    deployments.add_options(sub)
    sub = action(
        "backtest",
        cmd_backtest,
        "replay an events file under two policy files and compare the final decisions",
    )
    sub.add_argument("--old", type=Path, required=True, help="the policy in force (YAML)")
    sub.add_argument("--new", type=Path, required=True, help="the candidate (YAML)")
    sub.add_argument("--input", type=Path, required=True, help="events, as `modstream replay`")
    sub.add_argument("--max-changed", type=share, help="exit 1 past this share (2%%, 0.02)")
    sub.add_argument("--out", type=Path, help="keep both replays' outputs in OUT/old, OUT/new")
