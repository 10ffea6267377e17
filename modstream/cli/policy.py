"""`modstream policy …`: what policy authors run to validate, sign, approve, push and operate
policies on the policy.rules topic.

This module parses and prints; the keys, documents, signed records and the store rebuilt from
the topic are in modstream/ops/policy_service.py (which keys: its docstring). The moderation job
checks an active version's approval itself (PolicyStore.apply); this command reads the topic
the same way, so what it shows is what the job accepted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modstream.cli import promote as promote_cli
from modstream.core.config import PROJECT_ROOT, Settings
from modstream.ops.policy_service import (
    PolicyCliError,
    authorship,
    checked_document,
    cli_keyring,
    control_record,
    describe,
    load_store,
    now_ms,
    person_key,
    policy_key,
    publish,
    read_document,
    require_approval_default,
    version_record,
)
from modstream.policy.diff import diff
from modstream.policy.evaluate import PolicyError, load_policy, warnings
from modstream.trust.signing import approval_record
from modstream.trust.two_person import AUTHORSHIP_FIELD, authorship_refusal

APPROVALS_DIR = PROJECT_ROOT / "policy_rules" / "approvals"
Say = Callable[[str], None]


def _iso(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Commands.
def _document_of(path: Path) -> dict[str, Any]:
    """A policy file's document; for a signed policy.rules record (what `policy sign`
    prints) its `document`, once its author's own signature verified (field authorship)."""
    document = read_document(path)
    if not isinstance(document.get("document"), dict) or "event_id" not in document:
        return document
    refusal = authorship_refusal(document, cli_keyring())
    if refusal is not None:
        raise PolicyCliError(f"{path}: {refusal}")
    return dict(document["document"])


def cmd_validate(args: argparse.Namespace, say: Say) -> int:
    failed = 0
    for path in args.files:
        try:
            compiled = load_policy(_document_of(path))
        except PolicyError as error:
            failed += 1
            say(f"{path}: {len(error.problems)} problem(s)")
            for problem in error.problems:
                say(f"  {problem}")
            continue
        except PolicyCliError as error:
            failed += 1
            say(str(error))
            continue
        say(
            f"{path}: {compiled.policy_id} v{compiled.version} is valid "
            f"({len(compiled.rules)} rules)"
        )
        for warning in warnings(compiled.document):
            say(f"  warning: {warning}")
    return 1 if failed else 0


def cmd_diff(args: argparse.Namespace, say: Say) -> int:
    lines = diff(read_document(args.old), read_document(args.new))
    for line in lines or ["no rule-level differences"]:
        say(line)
    return 0


def cmd_sign(args: argparse.Namespace, say: Say) -> int:
    document = checked_document(args.file)
    ts = args.ts or now_ms()
    record = version_record(
        document,
        mode=args.mode,
        author=args.author,
        ts=ts,
        parent_version=args.parent,
        key=policy_key(),
        percent=args.percent,
        extra={AUTHORSHIP_FIELD: authorship(document, args.author, ts)},
    )
    say(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return 0


def cmd_approve(args: argparse.Namespace, say: Say) -> int:
    document = checked_document(args.file)
    if document["version"] != args.version:
        raise PolicyCliError(f"{args.file} holds version {document['version']}, not {args.version}")
    key = person_key(args.approver)
    if key is None:
        raise PolicyCliError(
            f"no key for {args.approver!r} (MODSTREAM_KEY_<NAME> or the keys file)"
        )
    approval = approval_record(document, args.approver, key, now_ms())
    args.approvals.mkdir(parents=True, exist_ok=True)
    path = args.approvals / f"{document['policy_id']}-v{args.version}-{args.approver}.json"
    path.write_text(json.dumps(approval, indent=2, sort_keys=True) + "\n")
    say(f"approved {document['policy_id']} v{args.version} as {args.approver}: {path}")
    return 0


def direct_activation(args: argparse.Namespace) -> dict[str, Any] | None:
    """An active push skips the promotion gate (no shadow comparison): only with a reason,
    recorded in the activation the author signs (field promotion, from_mode `push`)."""
    if args.mode != "active":
        return None
    reason = (args.reason or "").strip()
    if not reason:
        raise PolicyCliError(
            "--mode active skips the promotion gate (no shadow comparison): push --mode shadow "
            "and `modstream policy promote`, or give --reason TEXT (recorded, signed by you)"
        )
    return {"from_mode": "push", "by": args.author, "forced": True, "reason": reason}


def cmd_push(args: argparse.Namespace, say: Say) -> int:
    if args.mode == "canary" and args.percent is None:
        raise PolicyCliError("--mode canary needs --percent N")
    activation_fields = direct_activation(args)
    document = checked_document(args.file)
    record, after = publish(
        args.bootstrap_servers,
        args.topic,
        document,
        mode=args.mode,
        author=args.author,
        ts=args.ts or now_ms(),
        approvals_dir=args.approvals,
        require_approval=args.require_approval,
        percent=args.percent,
        activation_fields=activation_fields,
    )
    policy_id = record["policy_id"]
    say(f"pushed {policy_id} v{record['version']} as {args.mode} (event {record['event_id']})")
    say(describe(after.snapshot(policy_id), policy_id))
    return 0


def _control(command: str, version: int | None = None) -> Callable[[argparse.Namespace, Say], int]:
    def run(args: argparse.Namespace, say: Say) -> int:
        from modstream.core import kafkaio

        key = policy_key()
        store, _ = load_store(args.bootstrap_servers, args.topic, key)
        target: int | None = getattr(args, "version", version)
        if command == "rollback":
            assert target is not None
            current = store.snapshot(args.policy_id)
            if store.version(args.policy_id, target) is None:
                raise PolicyCliError(f"{args.policy_id} v{target} was never pushed")
            if current and current.active is not None and target >= current.active:
                raise PolicyCliError(f"v{target} is not older than the active v{current.active}")
        record = control_record(
            args.policy_id, command, ts=args.ts or now_ms(), key=key, version=target
        )
        kafkaio.produce(
            args.bootstrap_servers,
            args.topic,
            [(args.policy_id, json.dumps(record).encode("utf-8"))],
        )
        after, _ = load_store(args.bootstrap_servers, args.topic, key)
        say(f"{command} {args.policy_id}" + (f" to v{target}" if target else ""))
        say(describe(after.snapshot(args.policy_id), args.policy_id))
        return 0

    return run


def cmd_show(args: argparse.Namespace, say: Say) -> int:
    store, rejected = load_store(args.bootstrap_servers, args.topic, policy_key())
    policy_ids = [args.policy_id] if args.policy_id else store.policy_ids()
    if not policy_ids:
        say(f"no policy on {args.topic}")
    for policy_id in policy_ids:
        say(describe(store.snapshot(policy_id), policy_id))
        if args.history:
            _history(store.records(policy_id), say)
    if rejected:
        say(f"{len(rejected)} record(s) on {args.topic} were rejected and ignored:")
        for line in rejected:
            say(f"  {line}")
    return 0


def _history(records: list[dict[str, Any]], say: Say) -> None:
    """One policy's audit trail: versions with author, approvers, promotion gate and the
    rule-level diff to the version before; control records."""
    previous: dict[str, Any] | None = None
    for record in records:
        when = _iso(int(record["ts"]))
        if "command" in record:
            target = f" v{record['version']}" if "version" in record else ""
            say(f"  {when}  {record['command']}{target}")
            continue
        approvers = (
            ", ".join(
                f"{a['approver']} at {_iso(int(a['ts']))}" for a in record.get("approvals", [])
            )
            or "none"
        )
        share = f" {record.get('canary_percent')}%" if record["mode"] == "canary" else ""
        say(
            f"  {when}  v{record['version']} {record['mode']}{share}"
            f"  author {record.get('author')}  approved by {approvers}"
        )
        for line in _promotion_lines(record.get("promotion")):
            say(f"      {line}")
        if previous is not None:
            for line in diff(previous, record["document"]):
                say(f"      {line}")
        previous = record["document"]


def _promotion_lines(promotion: Any) -> list[str]:
    """What an activation record says about its promotion gate (modstream/ops/promotion.py)."""
    if not isinstance(promotion, dict):
        return []
    if promotion.get("from_mode") == "push":
        by, reason = promotion.get("by"), promotion.get("reason")
        return [f"pushed active without the promotion gate by {by}: {reason}"]
    share = f"{float(promotion.get('changed_fraction', 0)) * 100:.2f}%"
    limit = f"{float(promotion.get('max_changed', 0)) * 100:.2f}%"
    lines = [
        f"promoted from {promotion.get('from_mode')} by {promotion.get('by')}: "
        f"{promotion.get('changed')} of {promotion.get('compared')} outcomes changed "
        f"({share}, limit {limit}) since {_iso(int(promotion.get('window_since') or 0))}"
    ]
    if promotion.get("forced"):
        lines.append(f"FORCED past the limit by {promotion.get('by')}: {promotion.get('reason')}")
    elif promotion.get("reason"):
        lines.append(f"reason: {promotion.get('reason')}")
    return lines


Action = Callable[..., argparse.ArgumentParser]  # (name, handler, help_text, broker=False)


def add_parser(commands: Any, handler_wrapper: Callable[..., Any]) -> None:
    """Register `modstream policy` and its sub-commands on the main CLI."""
    policy = commands.add_parser(
        "policy", help="validate, sign, approve, push and operate policies"
    )
    actions = policy.add_subparsers(dest="policy_command", required=True)
    settings = Settings.from_env()

    def action(
        name: str,
        handler: Callable[[argparse.Namespace, Say], int],
        help_text: str,
        broker: bool = False,
    ) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler_wrapper(handler))
        if broker:
            sub.add_argument("--bootstrap-servers", default=settings.bootstrap_servers)
            sub.add_argument("--topic", default="policy.rules")
        return sub

    author = os.environ.get("MODSTREAM_POLICY_AUTHOR") or os.environ.get("USER") or "unknown"
    _add_authoring_parsers(action, author)
    _add_publishing_parsers(action, author)


def _add_authoring_parsers(action: Action, author: str) -> None:
    """validate, diff, sign, approve: files only, no broker."""
    sub = action(
        "validate",
        cmd_validate,
        "check policy files (or signed records: their author's signature too); every problem "
        "names its rule",
    )
    sub.add_argument("files", type=Path, nargs="+")
    sub = action("diff", cmd_diff, "rule-level differences: added, removed, changed thresholds")
    sub.add_argument("old", type=Path)
    sub.add_argument("new", type=Path)
    sub = action("sign", cmd_sign, "print the signed policy.rules record for a file")
    sub.add_argument("file", type=Path)
    sub.add_argument("--mode", choices=["active", "shadow", "canary"], default="active")
    sub.add_argument("--percent", type=float)
    sub.add_argument("--author", default=author)
    sub.add_argument("--parent", type=int)
    sub.add_argument("--ts", type=int, help="event time in ms (default: now)")
    sub = action("approve", cmd_approve, "record your signed approval of a policy version")
    sub.add_argument("version", type=int)
    sub.add_argument("--approver", required=True)
    sub.add_argument("--file", type=Path, default=PROJECT_ROOT / "policy_rules" / "global.yaml")
    sub.add_argument("--approvals", type=Path, default=APPROVALS_DIR)


def _add_publishing_parsers(action: Action, author: str) -> None:
    """push, rollback, pause, resume, show: on the policy.rules topic."""
    sub = action("push", cmd_push, "validate, check, sign and produce a version", broker=True)
    sub.add_argument("file", type=Path)
    sub.add_argument("--mode", choices=["active", "shadow", "canary"], default="active")
    sub.add_argument("--percent", type=float, help="canary share of content, 0..100")
    sub.add_argument("--author", default=author)
    sub.add_argument("--ts", type=int, help="event time in ms (default: now)")
    sub.add_argument("--approvals", type=Path, default=APPROVALS_DIR)
    sub.add_argument(
        "--reason",
        help="why --mode active skips the promotion gate (required with it; recorded, signed)",
    )
    sub.add_argument(
        "--no-require-approval",
        dest="require_approval",
        action="store_false",
        default=require_approval_default(),
        help="skip the approval-file check; the job still refuses an unapproved active version "
        "unless its deployment sets MODSTREAM_INSECURE_NO_APPROVAL=1",
    )
    for name, command, help_text in [
        ("rollback", "rollback", "make an older, already-pushed version active again"),
        ("pause", "pause_publication", "emergency: every new decision at least PENDING"),
        ("resume", "resume_publication", "end an emergency pause"),
    ]:
        sub = action(name, _control(command), help_text, broker=True)
        if name == "rollback":
            sub.add_argument("version", type=int)
        sub.add_argument("--policy-id", default="global")
        sub.add_argument("--ts", type=int, help="event time in ms (default: now)")
    promote_cli.add_parsers(action, author, APPROVALS_DIR)
    sub = action("show", cmd_show, "active, shadow, canary, pause and --history", broker=True)
    sub.add_argument("--policy-id")
    sub.add_argument("--history", action="store_true")
