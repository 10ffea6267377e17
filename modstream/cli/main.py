"""The `modstream` command: one entry point for the local stack, topics, schemas, jobs, demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from modstream.cli import handlers, registered
from modstream.core.config import Settings


def _positive_rate(text: str) -> float:
    """--rate: a finite number of requests per second above zero."""
    import math

    rate = float(text)
    if not math.isfinite(rate) or rate <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a rate above zero")
    return rate


Add = Callable[[str, Callable[..., int], str], argparse.ArgumentParser]  # a sub-command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modstream", description=__doc__)
    add_log_options(parser)  # read by global_options() first; here for `modstream -h`
    commands = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Callable[..., int], help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    # In this order: `modstream -h` lists the commands as they are added.
    add_stack_parsers(add)
    add_job_parsers(add)
    add_operations_parsers(add)
    add_replay_parsers(add)
    add_reevaluate_parser(add)
    from modstream.cli import policy as policy_cli

    policy_cli.add_parser(commands, handlers.policy_handler)
    from modstream.cli import archive as archive_cli
    from modstream.cli import evaluate as eval_cli
    from modstream.cli import sql as sql_cli

    sql_cli.add_parser(add)  # the analysts' commands (docs/ANALYSTS.md)
    archive_cli.add_parsers(add)  # archive, query, report
    eval_cli.add_parser(add)
    add_demo_parser(add)
    return parser


def add_stack_parsers(add: Add) -> None:
    """up, down, status, topics, schemas: the local stack and the contract."""
    add("up", handlers.cmd_up, "start Kafka (KRaft) and Redis on 127.0.0.1, wait until healthy")
    add("down", handlers.cmd_down, "stop what `up` started, by recorded pid")
    add("status", handlers.cmd_status, "show what runs where (exit 3 when something is down)")
    add("clean", handlers.cmd_clean, "down, then remove the stack's data: topics, Redis, archives")
    sub = add("topics", handlers.cmd_topics, "create (idempotent) or list the contract's topics")
    sub.add_argument("action", choices=["create", "list"])
    sub = add(
        "schemas",
        handlers.cmd_schemas,
        "export the contract's JSON Schema and Flink SQL tables, or check they are fresh",
    )
    sub.add_argument("action", choices=["export", "check"])
    sub = add(
        "config",
        handlers.cmd_config,
        "show the settings this process resolves (TOML, environment, defaults), secrets hidden",
    )
    sub.add_argument("action", choices=["show"])


def add_job_parsers(add: Add) -> None:
    """job, cluster, run: the Flink jobs, locally or on a session cluster."""
    sub = add(
        "job", handlers.cmd_job, "run a Flink job in a local MiniCluster until SIGTERM/Ctrl-C"
    )
    sub.add_argument("job", choices=["ingest-check", "moderation", "enforce", "reconciler", "scan"])
    sub.add_argument("job_args", nargs="*", help="the job's own options, after `--`")
    sub = add(
        "cluster", handlers.cmd_cluster, "start / stop a local Flink session cluster (the wheel's)"
    )
    sub.add_argument("action", choices=["up", "down"])
    sub.add_argument("--rest-port", type=int, default=8081)
    sub.add_argument("--rpc-port", type=int, default=6123)
    sub.add_argument("--slots", type=int, default=1)
    sub.add_argument(
        "--taskmanager-memory",
        default="2048m",
        help="taskmanager.memory.process.size (four jobs: 4 slots and about 4096m)",
    )
    add_submit_parsers(add)
    sub = add("run", handlers.cmd_run, "run a job: local MiniCluster, or submit with --jobmanager")
    sub.add_argument("job", choices=["moderation"])
    sub.add_argument(
        "--jobmanager",
        metavar="HOST:PORT",
        help="the cluster's REST address; without it, a local MiniCluster",
    )
    sub.add_argument(
        "--flink-home",
        type=Path,
        default=None,
        help="the Flink distribution whose `flink run` submits (default: the wheel's)",
    )
    sub.add_argument("job_args", nargs="*", help="the job's own options, after `--`")


def add_submit_parsers(add: Add) -> None:
    """package, submit, upgrade: the jobs on a cluster that has no modstream installed."""
    jobs = ["moderation", "scan", "enforce", "reconciler"]
    sub = add(
        "package",
        handlers.cmd_package,
        "build what a cluster needs: the job code archive, a relocatable Python with the"
        " dependencies (-pyarch/-pyexec), the jars",
    )
    sub.add_argument("--out", type=Path, default=None, help="default: RUN_DIR/package")
    sub = add("submit", handlers.cmd_submit, "submit a job to a session cluster with `flink run`")
    sub.add_argument("job", choices=jobs)
    sub.add_argument("--jobmanager", metavar="HOST:PORT", required=True, help="REST address")
    sub.add_argument("--package", type=Path, default=None, help="default: RUN_DIR/package")
    sub.add_argument("job_args", nargs="*", help="the job's own options, after `--`")
    sub = add(
        "upgrade",
        handlers.cmd_upgrade,
        "stop a running job with a savepoint, resubmit the current code from it",
    )
    sub.add_argument("job", choices=jobs)
    sub.add_argument("--jobmanager", metavar="HOST:PORT", required=True, help="REST address")
    sub.add_argument("--package", type=Path, default=None, help="default: RUN_DIR/package")
    sub.add_argument(
        "--savepoint-dir", type=Path, default=None, help="default: RUN_DIR/savepoints/JOB"
    )
    sub.add_argument(
        "job_args", nargs="*", help="the job's options, after `--`: the same as at submit"
    )


def add_operations_parsers(add: Add) -> None:
    """review, detect, dlq: what people operating the platform run."""
    sub = add(
        "review",
        handlers.cmd_review,
        "the human review queue (Redis Streams); you are the reviewer whose key is in "
        "MODSTREAM_KEYS_FILE, and decisions are signed with it",
    )
    sub.add_argument(
        "action",
        choices=["feed", "claim", "show", "decide", "backlog", "grant", "serve", "add-reviewer"],
    )
    sub.add_argument(
        "task", nargs="?", help="TASK for show / decide; REVIEWER for grant / add-reviewer"
    )
    sub.add_argument("--queue")
    sub.add_argument(
        "--queues", help="grant: the reviewer's queues, comma-separated (* all); empty revokes"
    )
    sub.add_argument(
        "--from-roles",
        action="store_true",
        help="grant: one grant per reviewer of the roles file (MODSTREAM_REVIEW_ROLES)",
    )
    sub.add_argument(
        "--outcome", choices=["ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK"]
    )
    sub.add_argument("--reason", default="")
    sub.add_argument("--prefix", default="", help="a deployment's topic prefix")
    sub.add_argument("--bootstrap-servers", default=None)
    from modstream.console import cli as console_cli

    console_cli.add_options(sub)  # serve, add-reviewer: the review console (docs/REVIEW.md)
    sub.set_defaults(handler=console_cli.with_console(handlers.cmd_review))
    sub = add(
        "detect", handlers.cmd_detect, "run one detector on a JSON-lines file of texts or paths"
    )
    sub.add_argument(
        "--detector",
        required=True,
        help="nsfw_image, offensive_text, media_check, ocr_text, speech_text",
    )
    sub.add_argument(
        "--input", type=Path, required=True, help='FILE.jsonl: {"text": …} or {"path": …}'
    )
    sub = add(
        "dlq", handlers.cmd_dlq, "list the dead-letter queue, or replay items after a re-check"
    )
    sub.add_argument("action", choices=["list", "replay"])
    sub.add_argument("--class", dest="error_class", default=None, help="only this error_class")
    sub.add_argument("--topic", default=None, help="the physical DLQ topic")
    sub.add_argument("--prefix", default="", help="a deployment's topic prefix")
    sub.add_argument("--bootstrap-servers", default=None)


def add_replay_parsers(add: Add) -> None:
    """bench, replay: the moderation job on a file or beside its peers."""
    add(
        "bench",
        handlers.cmd_bench,
        "the moderation job beside the floor and hand-written peers (-h)",
    )
    sub = add(
        "replay", handlers.cmd_replay, "run the moderation job on a JSON-lines file (CONTRACT.md)"
    )
    sub.add_argument("--input", type=Path, required=True, help="EVENTS.jsonl")
    sub.add_argument("--policy", type=Path, required=True, help="trusted POLICY.yaml")
    sub.add_argument("--out", type=Path, required=True, help="directory for <topic>.jsonl")
    sub.add_argument("--parallelism", type=int, default=1)
    sub.add_argument(
        "--scan-requests",
        action="store_true",
        help="also write the scan requests the job made (what the detectors would be asked)",
    )
    sub.add_argument(
        "--engine",
        choices=("pyflink", "batched"),
        default="batched",
        help="the job's keyed operators (modstream/jobs/moderation/job.py --engine; batched by"
        " default)",
    )


def add_reevaluate_parser(add: Add) -> None:
    """reevaluate: re-decide stored versions under a new policy version."""
    sub = add(
        "reevaluate",
        handlers.cmd_reevaluate,
        "re-decide versions decided under an older policy (stored evidence, no detectors), "
        "selected from moderation.index; human decisions (sticky) and deleted versions skipped",
    )
    sub.add_argument(
        "--policy-version",
        type=int,
        required=True,
        help="the new version: versions decided under an older one are selected",
    )
    sub.add_argument("--policy-id", default="global")
    sub.add_argument("--since", type=int, default=0, help="only versions at or after this ts (ms)")
    sub.add_argument("--until", type=int, default=None, help="only versions before this ts (ms)")
    sub.add_argument(
        "--time",
        choices=["decision", "upload"],
        default="decision",
        help="which ts --since/--until bound: the latest decision's (default) or the upload's",
    )
    sub.add_argument("--surface", help="only this surface")
    sub.add_argument("--region", help="only this region")
    sub.add_argument("--modality", choices=["text", "image", "video", "audio"])
    sub.add_argument(
        "--rate",
        type=_positive_rate,
        default=100.0,
        help="requests per second at most (default 100: live traffic keeps priority)",
    )
    sub.add_argument("--ts", type=int, help="event time of the requests (default: now)")
    sub.add_argument("--prefix", default="", help="a deployment's topic prefix")
    sub.add_argument("--bootstrap-servers")
    sub.add_argument(
        "--dry-run", action="store_true", help="print the count and a sample; produce nothing"
    )
    sub.add_argument("--sample", type=int, default=10, help="versions shown by --dry-run")
    sub.add_argument(
        "--read-timeout",
        type=float,
        default=3600.0,
        help="seconds to read moderation.index to its end (about 10,000 records/s)",
    )


def add_demo_parser(add: Add) -> None:
    """demo: the whole loop on a generated workload."""
    sub = add("demo", handlers.cmd_demo, "generate a workload, run the jobs on it, print a summary")
    sub.add_argument(
        "--events",
        "--count",
        dest="count",
        type=int,
        default=200,
        help="content versions to send, with their evidence, reports and reviews",
    )
    sub.add_argument("--seed", type=int, default=7)
    sub.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    sub.add_argument(
        "--detectors",
        choices=["generated", "real"],
        default="generated",
        help="real: text and images scanned by the ONNX detectors (scan job), sent in real time",
    )
    sub.add_argument(
        "--jobmanager",
        metavar="HOST:PORT",
        help="submit the jobs to this session cluster (`modstream submit`) instead of running"
        " them here",
    )


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after the first `--` belongs to the job (`modstream run moderation --
    --policy …`); argparse's sub-commands do not pass it through by themselves."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def global_options(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """`--log-format` and `--log-level`, wherever they stand (before the command, or after it
    for `bench`, whose options are its own), and the rest of the arguments."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_log_options(parser)
    return parser.parse_known_args(argv)


def add_log_options(parser: argparse.ArgumentParser) -> None:
    from modstream.core import logs

    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=None,
        help="logs on stderr as text or one JSON object a line (default: MODSTREAM_LOG_FORMAT, "
        "then the settings' log_format, then text)",
    )
    parser.add_argument("--log-level", choices=logs.LEVELS, default=None)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` belongs to the job (`modstream run moderation -- --policy …`);
    # argparse's sub-commands do not pass it through by themselves.
    argv, passthrough = split_passthrough(argv)
    options, argv = global_options(argv)
    try:
        settings = Settings.from_env()
    except ValueError as error:
        print(f"modstream: {error}", file=sys.stderr)
        return 2
    from modstream.core import logs

    logs.configure(
        (options.log_format or settings.log_format) == "json",
        options.log_level or settings.log_level,
        command=" ".join(argv[:1]) or "modstream",
    )
    if argv[:1] and argv[0] in registered.NAMES:  # its own options, `--` or not
        return registered.command(argv[0])([*argv[1:], *passthrough])
    args = build_parser().parse_args(argv)
    if hasattr(args, "job_args"):
        args.job_args = [*args.job_args, *passthrough]
    elif passthrough:
        print(f"modstream {args.command}: takes no arguments after --", file=sys.stderr)
        return 2
    from modstream.stack.local import StackError

    try:
        code: int = args.handler(args, settings)
    except StackError as error:
        print(f"modstream {args.command}: {error}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
