"""ingest_check: content.versions -> schema validation -> content.validated | moderation.dlq.

The first job on the real stack: it proves the plumbing every later job stands on (Kafka source
with topic and key, thread-mode Python, a DLQ side output, one exactly-once sink for all
outputs). Run it with `modstream job ingest-check` or `python -m modstream.jobs.ingest_check`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

from pyflink.common import Row, WatermarkStrategy
from pyflink.datastream import DataStream, OutputTag, ProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.functions import RuntimeContext

from modstream.core import logs
from modstream.core.config import Settings
from modstream.jobs import options, runtime
from modstream.jobs.metrics import NO_METRICS, OperatorMetrics, error_class
from modstream.moderation.ingest import check

DLQ = OutputTag("dlq", runtime.SINK_ROW)


class IngestCheck(ProcessFunction):
    """Adapter: Row(topic, key, value, ts) in, valid rows out, rejected rows to the DLQ tag."""

    metrics = NO_METRICS  # until open

    def __init__(
        self, valid_topic: str, dlq_topic: str, contract_names: dict[str, str] | None = None
    ) -> None:
        self.valid_topic = valid_topic
        self.dlq_topic = dlq_topic
        self.contract_names = contract_names or {}

    def open(self, runtime_context: RuntimeContext) -> None:
        self.metrics = OperatorMetrics(runtime_context, "ingest_check")

    def process_element(self, value: Row, ctx: Any) -> Iterator[Any]:
        routed = check(
            value[0],
            value[1],
            value[2],
            value[3] or 0,
            valid_topic=self.valid_topic,
            dlq_topic=self.dlq_topic,
            schema_topic=self.contract_names.get(value[0]),
        )
        row = Row(routed.topic, routed.key, routed.value)
        if routed.rejected:
            self.metrics.inc("dlq", error_class=error_class(routed.value))
            yield DLQ, row
        else:
            yield row


# What the job reads and writes (docs/architecture.md draws both: modstream/jobs/graph.py).
INPUT_TOPICS = ("content.versions",)
OUTPUT_TOPICS = ("content.validated", "moderation.dlq")


def build(
    env: StreamExecutionEnvironment,
    source: DataStream,
    sink: Callable[[DataStream], Any],
    config: runtime.JobConfig,
) -> None:
    """Wire the check between `source` (rows of SOURCE_ROW) and `sink` (rows of SINK_ROW)."""
    checked = (
        source.process(
            IngestCheck(
                config.topic("content.validated"),
                config.topic("moderation.dlq"),
                config.contract_names(),
            ),
            output_type=runtime.SINK_ROW,
        )
        .name("ingest_check")
        .uid("ingest_check")
    )
    sink(checked.union(checked.get_side_output(DLQ)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return options.job_parser("ingest_check", __doc__).parse_args(argv)


def config_from_args(args: argparse.Namespace, settings: Settings) -> runtime.JobConfig:
    return runtime.job_config("ingest_check", args, settings)


def main(argv: list[str] | None = None) -> int:
    settings = Settings.from_env()
    logs.configure_job("ingest_check", settings)
    config = config_from_args(parse_args(argv), settings)
    env = runtime.create_env(config, settings)
    source = env.from_source(
        runtime.kafka_source(config, [config.topic(name) for name in INPUT_TOPICS]),
        WatermarkStrategy.no_watermarks(),
        "content.versions",
        type_info=runtime.SOURCE_ROW,
    ).uid("source_content_versions")
    build(
        env, source, lambda stream: stream.sink_to(runtime.kafka_sink(config)).uid("sink"), config
    )
    if config.restore_from:
        print(f"ingest_check: restoring from {config.restore_from}", flush=True)
    return runtime.run(env, config.name)


if __name__ == "__main__":
    raise SystemExit(main())
