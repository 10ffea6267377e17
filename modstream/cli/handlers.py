"""What each `modstream` sub-command does with its parsed arguments (modstream/cli/main.py parses
them): call the service that does the work, print what it did, return the exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modstream.core import topics
from modstream.core.config import Settings

if TYPE_CHECKING:
    from modstream.review.queue import ReviewQueue


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import local as stack

    stack.up(settings)
    return 0


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import local as stack

    stack.down(settings)
    return 0


def cmd_clean(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import local as stack

    stack.clean(settings)
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import local as stack

    print(f"run directory {settings.run_dir}")
    states = stack.status(settings)
    for state in states:
        print(state.line())
    return 0 if all(state.healthy for state in states) else 3


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.core import redaction

    print(json.dumps(redaction.described(settings), indent=2))
    return 0


def cmd_topics(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "create":
        created = topics.create_topics(settings.bootstrap_servers, layout=settings.topics)
        print(f"topics: {len(created)} created, {len(topics.TOPICS) - len(created)} already there")
    else:
        for spec in topics.TOPICS:
            print(
                f"{spec.name:<26} {spec.partitions:>2}  {spec.config.get('cleanup.policy'):<8}"
                f" {spec.purpose}"
            )
    return 0


def cmd_schemas(args: argparse.Namespace, settings: Settings) -> int:
    """modstream/contract/json/ and the Flink SQL tables (deploy/sql/tables.sql), both from the
    models."""
    from modstream.analytics import sql_tables
    from modstream.contract import export

    if args.action == "export":
        for path in [*export.export(), sql_tables.export()]:
            print(f"wrote {path.relative_to(settings.project_root)}")
        return 0
    problems = export.stale() + sql_tables.stale()
    for problem in problems:
        print(f"stale: {problem}")
    if problems:
        print(
            "run `modstream schemas export` and commit modstream/contract/json/ and "
            "deploy/sql/tables.sql"
        )
        return 1
    print("modstream/contract/json/ and deploy/sql/tables.sql match the models")
    return 0


def cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    if args.job == "ingest-check":
        from modstream.jobs import ingest_check

        return ingest_check.main(args.job_args)
    if args.job == "moderation":
        from modstream.jobs.moderation import job as moderation

        return moderation.main(args.job_args)
    if args.job == "enforce":
        from modstream.jobs import enforce

        return enforce.main(args.job_args)
    if args.job == "scan":
        from modstream.jobs.scan import job as scan

        return scan.main(args.job_args)
    if args.job == "reconciler":
        from modstream.jobs import reconciler

        return reconciler.main(args.job_args)
    raise AssertionError(args.job)


def cmd_cluster(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import cluster

    if args.action == "up":
        cluster.up(
            settings,
            rest_port=args.rest_port,
            rpc_port=args.rpc_port,
            slots=args.slots,
            conf={"taskmanager.memory.process.size": args.taskmanager_memory},
        )
    else:
        cluster.down(settings)
    return 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    job_args = args.job_args
    if args.jobmanager is None:
        from modstream.jobs.moderation import job as moderation

        return moderation.main(job_args)
    from modstream.stack import cluster

    return cluster.submit("moderation", args.jobmanager, job_args, flink_home=args.flink_home)


def cmd_package(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import package

    built = package.build(args.out or package.default_dir(settings), settings)
    for line in built.described():
        print(f"package: {line}")
    print(f"package: submit with -pyexec {package.PYTHON_EXEC} (`modstream submit`)")
    return 0


def _package(args: argparse.Namespace, settings: Settings) -> Any:
    from modstream.stack import package

    built = package.build(args.package or package.default_dir(settings), settings)
    return built


# The jobs that verify or sign authority records (docs/RELIABILITY.md, "Signed authority inputs").
KEYED_JOBS = ("moderation", "scan")


def check_job_keys(job: str, job_args: list[str], settings: Settings) -> None:
    """Before packaging: the keyring the job's main will build from this environment, refused
    as the job would refuse it (a dev secret beside brokers that are not local, a malformed or
    retired setting), its insecure settings logged; SystemExit naming the setting."""
    if job not in KEYED_JOBS:
        return
    from modstream.jobs.keys import job_keyring

    bootstrap = settings.bootstrap_servers
    if "--bootstrap-servers" in job_args[:-1]:
        bootstrap = job_args[job_args.index("--bootstrap-servers") + 1]
    job_keyring(job, bootstrap, settings.kafka.java_properties())


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import cluster

    check_job_keys(args.job, args.job_args, settings)
    built = _package(args, settings)
    code = cluster.submit(args.job, args.jobmanager, args.job_args, package=built)
    if code != 0:
        print(f"modstream submit: `flink run` of {args.job} failed ({code})", file=sys.stderr)
    return code


def cmd_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.stack import cluster, cluster_jobs

    cluster_jobs.active_job(args.jobmanager, args.job)  # before the package: a clear error
    built = _package(args, settings)

    def submit(job_args: list[str]) -> int:
        return cluster.submit(args.job, args.jobmanager, job_args, package=built)

    savepoints = args.savepoint_dir or settings.run_dir / "savepoints"
    return cluster_jobs.upgrade(args.job, args.jobmanager, args.job_args, savepoints, submit)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.cli import registered

    # reached only through build_parser(); main() passes the options (modstream/bench/compare.py)
    return registered.command("bench")([])


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.ops import replay

    return replay.run(
        args.input,
        args.policy,
        args.out,
        parallelism=args.parallelism,
        scan_requests=args.scan_requests,
        engine=args.engine,
    )


def cmd_reevaluate(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from modstream.ops import reevaluate

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
        return topics.physical(name, args.prefix)

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


def cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    import json

    import redis

    from modstream.ops import dlq

    servers = args.bootstrap_servers or settings.bootstrap_servers
    topic = args.topic or topics.physical("moderation.dlq", args.prefix)
    client = redis.Redis.from_url(settings.redis_url)
    if args.action == "list":
        # By owner: each owner's counts per class on stderr, then its records (JSON lines).
        letters = dlq.list_letters(servers, topic, args.error_class, client)
        for owner, per_class in dlq.by_owner(letters).items():
            classes = ", ".join(f"{name} {count}" for name, count in per_class.items())
            print(f"dlq: owner {owner}: {sum(per_class.values())} ({classes})", file=sys.stderr)
            for letter in letters:
                if dlq.owner(letter) == owner:
                    print(json.dumps(letter, ensure_ascii=False))
        print(f"dlq: {len(letters)} records on {topic}", file=sys.stderr)
        return 0
    counts = dlq.replay(
        servers, topic, client, error_class=args.error_class, prefix=args.prefix, say=print
    )
    print("dlq replay: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    return 0


def cmd_review(args: argparse.Namespace, settings: Settings) -> int:
    import json
    import time

    import redis

    from modstream.review.queue import Reviewer, ReviewError, ReviewQueue, Roles

    roles_file = Path(
        os.environ.get("MODSTREAM_REVIEW_ROLES")
        or settings.project_root / "policy_rules" / "reviewers.yaml"
    )
    queue = ReviewQueue(redis.Redis.from_url(settings.redis_url), Roles.load(roles_file))
    servers = args.bootstrap_servers or settings.bootstrap_servers

    def topic(name: str) -> str:
        return topics.physical(name, args.prefix)

    def sender(name: str, key_field: str = "content_id") -> Callable[[dict[str, Any]], None]:
        return _sender(servers, topic(name), key_field)

    now = int(time.time() * 1000)
    try:
        if args.action == "feed":
            _review_feed(queue, servers, topic("review.tasks"))
        elif args.action == "claim":
            lease = sender("review.leases")
            task = queue.claim(args.queue, Reviewer.from_env(), now, lease)
            print(json.dumps(task) if task else f"review claim: queue {args.queue} is empty")
        elif args.action == "grant":
            _review_grant(args, queue.roles.grants, sender("review.grants", "reviewer_id"), now)
        elif args.action == "show":
            print(json.dumps(queue.show(args.task, Reviewer.from_env().reviewer_id), indent=2))
        elif args.action == "decide":
            # Who decides is whoever's key signs: the one entry of the reviewer's keys file.
            # The record reaches the broker before the task is acknowledged (an outbox order).
            record = queue.decide(
                args.task,
                Reviewer.from_env(),
                args.outcome,
                args.reason,
                now,
                sender("review.decisions"),
                sender("review.leases"),
            )
            print(json.dumps(record))
        else:
            print(json.dumps(queue.backlog(now), indent=2))
    except ReviewError as error:
        print(f"modstream review {args.action}: {error}", file=sys.stderr)
        return 1
    return 0


def _review_feed(queue: ReviewQueue, servers: str, physical: str) -> None:
    """Feed the review queue every task of `physical` (review.tasks); a malformed record is
    skipped and counted, never the end of the feed."""
    from modstream.contract.records import decode_values
    from modstream.core import kafkaio

    records = kafkaio.read_to_end(servers, physical, committed=True)
    tasks, skipped = decode_values(records, "review.tasks")
    fed = sum(queue.feed(task) for task in tasks)
    print(
        f"review feed: {fed} new tasks of {len(records)}"
        + (f"; skipped {skipped} malformed" if skipped else "")
    )


def _sender(servers: str, physical: str, key_field: str) -> Callable[[dict[str, Any]], None]:
    """Produce one record to `physical`, keyed by its `key_field`, returning once the broker
    acknowledged it (what `review` sends: grants, leases, decisions)."""
    import json

    from modstream.core import kafkaio

    def send(record: dict[str, Any]) -> None:
        value = json.dumps(record).encode("utf-8")
        kafkaio.produce(servers, physical, [(str(record[key_field]), value)])

    return send


def _review_grant(
    args: argparse.Namespace,
    roles: dict[str, list[str]],
    send: Callable[[dict[str, Any]], None],
    now: int,
) -> None:
    """`review grant`: grants signed by the lead whose key is in MODSTREAM_KEYS_FILE, to
    review.grants, where the moderation job reads them (modstream/review/access.py)."""
    from modstream.review.queue import Reviewer, ReviewError, grant_record

    if not (args.from_roles or (args.task and args.queues is not None)):
        raise ReviewError("give REVIEWER and --queues q1,q2 (empty: revoke), or --from-roles")
    lead = Reviewer.from_env()
    wanted = sorted(roles.items()) if args.from_roles else [(args.task, _queues(args.queues))]
    for reviewer_id, queues in wanted:
        send(lead.sign(grant_record(reviewer_id, queues, lead.reviewer_id, now)))
    print(f"review grant: {len(wanted)} grants sent, signed by {lead.reviewer_id}")


def _queues(setting: str) -> list[str]:
    """`a,b` -> [a, b]; empty -> [] (a revocation)."""
    return [name.strip() for name in setting.split(",") if name.strip()]


def cmd_detect(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.detectors import detect_cli

    return detect_cli.run(args.detector, args.input)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from modstream.demo import run as demo

    return demo.run(
        settings,
        count=args.count,
        seed=args.seed,
        as_json=args.json,
        detectors=args.detectors,
        jobmanager=args.jobmanager,
    )


def policy_handler(
    handler: Callable[[argparse.Namespace, Callable[[str], None]], int],
) -> Callable[[argparse.Namespace, Settings], int]:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        from modstream.ops.policy_service import PolicyCliError

        try:
            return handler(args, print)
        except PolicyCliError as error:
            print(f"modstream policy {args.policy_command}: {error}", file=sys.stderr)
            return 1

    return run
