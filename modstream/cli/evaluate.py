"""`modstream eval`: precision and recall of the automated decisions against human labels.

Parses and prints; modstream/analytics/evaluation.py does the work.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from modstream.core.config import Settings
from modstream.stack import deployments

Add = Callable[[str, Callable[..., int], str], argparse.ArgumentParser]


def add_parser(add: Add) -> None:
    sub = add(
        "eval",
        cmd_eval,
        "grade the archived automated decisions against human labels (a labels file and the "
        "reviewers' decisions): precision and recall per reason, mistakes by id, block and "
        "review rates, by surface, region, modality, model and policy version",
    )
    sub.add_argument(
        "--labels",
        type=Path,
        required=True,
        help='LABELS.jsonl: {"content_id", "content_version", "violating", "reason", "labeler"}'
        " a line (docs/ANALYSTS.md)",
    )
    deployments.add_options(sub)
    sub.add_argument(
        "--id-prefix",
        default=None,
        help="put before every label's content id (default: with --last-demo, that run's id, "
        "so `c7-12` is the demo's `demo1a2b3c-c7-12`; else none)",
    )
    sub.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="the policy whose rule reasons a reviewer's reason may be "
        "(default: policy_rules/global.yaml)",
    )
    sub.add_argument(
        "--no-reviews", action="store_true", help="grade against the file's labels alone"
    )
    sub.add_argument("--samples", type=int, default=5, help="mistakes listed per reason")
    sub.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """0 when at least one label was graded, 1 when none was, 2 on bad input."""
    from modstream.analytics import evaluation
    from modstream.analytics.labels import LabelsError

    try:
        prefix = deployments.prefix_of(args, settings)
        id_prefix = args.id_prefix
        if id_prefix is None:
            id_prefix = f"{prefix}-" if args.last_demo and prefix else ""
        result = evaluation.run(
            settings,
            prefix,
            args.labels,
            id_prefix,
            policy_path=args.policy,
            reviews=not args.no_reviews,
            samples=max(0, args.samples),
        )
    except (LabelsError, deployments.DeploymentError, evaluation.EvaluationError) as error:
        print(f"modstream eval: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(evaluation.format_table(result), end="")
    return 0 if result.coverage.matched else 1
