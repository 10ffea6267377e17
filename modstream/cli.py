"""The `modstream` command: one entry point for the local stack, topics, schemas, jobs, demo."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from modstream.config import Settings


def _cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import stack

    stack.up(settings)
    return 0


def _cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import stack

    stack.down(settings)
    return 0


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import stack

    print(f"run directory {settings.run_dir}")
    states = stack.status(settings)
    for state in states:
        print(state.line())
    return 0 if all(state.healthy for state in states) else 3


def _cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import topics

    if args.action == "create":
        created = topics.create_topics(settings.bootstrap_servers)
        print(f"topics: {len(created)} created, {len(topics.TOPICS) - len(created)} already there")
    else:
        for spec in topics.TOPICS:
            print(
                f"{spec.name:<26} {spec.partitions:>2}  {spec.config.get('cleanup.policy'):<8}"
                f" {spec.purpose}"
            )
    return 0


def _cmd_schemas(args: argparse.Namespace, settings: Settings) -> int:
    from schemas import export

    if args.action == "export":
        for path in export.export():
            print(f"wrote {path.relative_to(settings.project_root)}")
        return 0
    problems = export.stale()
    for problem in problems:
        print(f"stale: {problem}")
    if problems:
        print("run `modstream schemas export` and commit schemas/json/")
        return 1
    print("schemas/json/ matches the models")
    return 0


def _cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    if args.job == "ingest-check":
        from jobs import ingest_check

        return ingest_check.main(args.job_args)
    if args.job == "moderation":
        from jobs import moderation

        return moderation.main(args.job_args)
    if args.job == "enforce":
        from jobs import enforce

        return enforce.main(args.job_args)
    if args.job == "scan":
        from jobs import scan

        return scan.main(args.job_args)
    if args.job == "reconciler":
        from jobs import reconciler

        return reconciler.main(args.job_args)
    raise AssertionError(args.job)


def _cmd_cluster(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import cluster

    if args.action == "up":
        cluster.up(settings, rest_port=args.rest_port, rpc_port=args.rpc_port, slots=args.slots)
    else:
        cluster.down(settings)
    return 0


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    job_args = args.job_args
    if args.jobmanager is None:
        from jobs import moderation

        return moderation.main(job_args)
    from modstream import cluster

    return cluster.submit("moderation", args.jobmanager, job_args, flink_home=args.flink_home)


def _cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from benchmarks import bench_compare

    return bench_compare.main([])  # reached only through build_parser(); main() passes options


def _cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import replay

    return replay.run(
        args.input,
        args.policy,
        args.out,
        parallelism=args.parallelism,
        scan_requests=args.scan_requests,
    )


def _positive_rate(text: str) -> float:
    """--rate: a finite number of requests per second above zero."""
    import math

    rate = float(text)
    if not math.isfinite(rate) or rate <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a rate above zero")
    return rate


def _cmd_reevaluate(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from modstream import reevaluate

    selection = reevaluate.Selection(
        args.policy_id,
        args.policy_version,
        since_ts=args.since,
        until_ts=args.until,
        time_field=args.time,
        surface=args.surface,
        region=args.region,
        modality=args.modality,
    )

    def topic(name: str) -> str:
        return f"{args.prefix}.{name}" if args.prefix else name

    return reevaluate.run(
        args.bootstrap_servers or settings.bootstrap_servers,
        selection,
        rate_per_s=args.rate,
        ts=args.ts or int(time.time() * 1000),
        index_topic=topic("moderation.index"),
        target_topic=topic("moderation.reevaluate"),
        dry_run=args.dry_run,
        sample=args.sample,
        read_timeout_s=args.read_timeout,
    )


def _cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    import json

    import redis

    from modstream import dlq

    servers = args.bootstrap_servers or settings.bootstrap_servers
    topic = args.topic or (f"{args.prefix}.moderation.dlq" if args.prefix else "moderation.dlq")
    if args.action == "list":
        letters = dlq.list_letters(servers, topic, args.error_class)
        for letter in letters:
            print(json.dumps(letter, ensure_ascii=False))
        print(f"dlq: {len(letters)} records on {topic}", file=sys.stderr)
        return 0
    client = redis.Redis.from_url(settings.redis_url)
    counts = dlq.replay(
        servers, topic, client, error_class=args.error_class, prefix=args.prefix, say=print
    )
    print("dlq replay: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    return 0


def _cmd_review(args: argparse.Namespace, settings: Settings) -> int:
    import json
    import time

    import redis

    from modstream import kafkaio
    from modstream.review import Reviewer, ReviewError, ReviewQueue, Roles

    roles_file = Path(
        os.environ.get("MODSTREAM_REVIEW_ROLES")
        or settings.project_root / "policy_rules" / "reviewers.yaml"
    )
    queue = ReviewQueue(redis.Redis.from_url(settings.redis_url), Roles.load(roles_file))
    servers = args.bootstrap_servers or settings.bootstrap_servers

    def topic(name: str) -> str:
        return f"{args.prefix}.{name}" if args.prefix else name

    now = int(time.time() * 1000)
    try:
        if args.action == "feed":
            records = kafkaio.read_to_end(servers, topic("review.tasks"), committed=True)
            # A malformed record is skipped and counted, never the end of the feed.
            tasks, skipped = kafkaio.decode_values(records, "review.tasks")
            fed = sum(queue.feed(task) for task in tasks)
            print(
                f"review feed: {fed} new tasks of {len(records)}"
                + (f"; skipped {skipped} malformed" if skipped else "")
            )
        elif args.action == "claim":
            task = queue.claim(args.queue, Reviewer.from_env().reviewer_id)
            print(json.dumps(task) if task else f"review claim: queue {args.queue} is empty")
        elif args.action == "show":
            print(json.dumps(queue.show(args.task, Reviewer.from_env().reviewer_id), indent=2))
        elif args.action == "decide":
            # Who decides is whoever's key signs: the one entry of the reviewer's keys file.
            record = queue.decide(args.task, Reviewer.from_env(), args.outcome, args.reason, now)
            kafkaio.produce(
                servers,
                topic("review.decisions"),
                [(record["content_id"], json.dumps(record).encode("utf-8"))],
            )
            print(json.dumps(record))
        else:
            print(json.dumps(queue.backlog(now), indent=2))
    except ReviewError as error:
        print(f"modstream review {args.action}: {error}", file=sys.stderr)
        return 1
    return 0


def _cmd_detect(args: argparse.Namespace, settings: Settings) -> int:
    from udfs import detect_cli

    return detect_cli.run(args.detector, args.input)


def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from modstream import demo

    return demo.run(
        settings, count=args.count, seed=args.seed, as_json=args.json, detectors=args.detectors
    )


def _policy_handler(
    handler: Callable[[argparse.Namespace, Callable[[str], None]], int],
) -> Callable[[argparse.Namespace, Settings], int]:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        from modstream.policy_cli import PolicyCliError

        try:
            return handler(args, print)
        except PolicyCliError as error:
            print(f"modstream policy {args.policy_command}: {error}", file=sys.stderr)
            return 1

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modstream", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Callable[..., int], help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    add("up", _cmd_up, "start Kafka (KRaft) and Redis on 127.0.0.1, wait until healthy")
    add("down", _cmd_down, "stop what `up` started, by recorded pid")
    add("status", _cmd_status, "show what runs where (exit 3 when something is down)")
    sub = add("topics", _cmd_topics, "create (idempotent) or list the contract's topics")
    sub.add_argument("action", choices=["create", "list"])
    sub = add("schemas", _cmd_schemas, "export the contract's JSON Schema, or check it is fresh")
    sub.add_argument("action", choices=["export", "check"])
    sub = add("job", _cmd_job, "run a Flink job in a local MiniCluster until SIGTERM/Ctrl-C")
    sub.add_argument("job", choices=["ingest-check", "moderation", "enforce", "reconciler", "scan"])
    sub.add_argument("job_args", nargs="*", help="the job's own options, after `--`")
    sub = add("cluster", _cmd_cluster, "start / stop a local Flink session cluster (the wheel's)")
    sub.add_argument("action", choices=["up", "down"])
    sub.add_argument("--rest-port", type=int, default=8081)
    sub.add_argument("--rpc-port", type=int, default=6123)
    sub.add_argument("--slots", type=int, default=1)
    sub = add("run", _cmd_run, "run a job: local MiniCluster, or submit with --jobmanager")
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
    sub = add(
        "review",
        _cmd_review,
        "the human review queue (Redis Streams); you are the reviewer whose key is in "
        "MODSTREAM_KEYS_FILE, and decisions are signed with it",
    )
    sub.add_argument("action", choices=["feed", "claim", "show", "decide", "backlog"])
    sub.add_argument("task", nargs="?", help="TASK for show / decide")
    sub.add_argument("--queue")
    sub.add_argument(
        "--outcome", choices=["ALLOW", "PROVISIONAL_ALLOW", "PENDING", "RESTRICT", "BLOCK"]
    )
    sub.add_argument("--reason", default="")
    sub.add_argument("--prefix", default="", help="a deployment's topic prefix")
    sub.add_argument("--bootstrap-servers", default=None)
    sub = add("detect", _cmd_detect, "run one detector on a JSON-lines file of texts or paths")
    sub.add_argument("--detector", required=True, help="nsfw_image, offensive_text, media_check")
    sub.add_argument(
        "--input", type=Path, required=True, help='FILE.jsonl: {"text": …} or {"path": …}'
    )
    sub = add("dlq", _cmd_dlq, "list the dead-letter queue, or replay items after a re-check")
    sub.add_argument("action", choices=["list", "replay"])
    sub.add_argument("--class", dest="error_class", default=None, help="only this error_class")
    sub.add_argument("--topic", default=None, help="the physical DLQ topic")
    sub.add_argument("--prefix", default="", help="a deployment's topic prefix")
    sub.add_argument("--bootstrap-servers", default=None)
    add("bench", _cmd_bench, "the moderation job beside the floor and hand-written peers (-h)")
    sub = add("replay", _cmd_replay, "run the moderation job on a JSON-lines file (CONTRACT.md)")
    sub.add_argument("--input", type=Path, required=True, help="EVENTS.jsonl")
    sub.add_argument("--policy", type=Path, required=True, help="trusted POLICY.yaml")
    sub.add_argument("--out", type=Path, required=True, help="directory for <topic>.jsonl")
    sub.add_argument("--parallelism", type=int, default=1)
    sub.add_argument(
        "--scan-requests",
        action="store_true",
        help="also write the scan requests the job made (what the detectors would be asked)",
    )
    sub = add(
        "reevaluate",
        _cmd_reevaluate,
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
    from modstream import policy_cli

    policy_cli.add_parser(commands, _policy_handler)
    sub = add("demo", _cmd_demo, "generate a workload, run the jobs on it, print a summary")
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
    return parser


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after the first `--` belongs to the job (`modstream run moderation --
    --policy …`); argparse's sub-commands do not pass it through by themselves."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its own options (benchmarks/bench_compare.py), `--` or not
        from benchmarks import bench_compare

        return bench_compare.main([arg for arg in argv[1:] if arg != "--"])
    # Everything after `--` belongs to the job (`modstream run moderation -- --policy …`);
    # argparse's sub-commands do not pass it through by themselves.
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if hasattr(args, "job_args"):
        args.job_args = [*args.job_args, *passthrough]
    elif passthrough:
        print(f"modstream {args.command}: takes no arguments after --", file=sys.stderr)
        return 2
    try:
        settings = Settings.from_env()
    except ValueError as error:
        print(f"modstream: {error}", file=sys.stderr)
        return 2
    from modstream.stack import StackError

    try:
        code: int = args.handler(args, settings)
    except StackError as error:
        print(f"modstream {args.command}: {error}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
