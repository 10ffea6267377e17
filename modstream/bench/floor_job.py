"""The engine's floor: a PyFlink job on the moderation job's input topics that only decodes each
record, keys it by its Kafka key (the content id, taken in Java), reads and writes one small
JSON value of keyed state and encodes one output, through the same exactly-once Kafka sink and
checkpoints. No event time, no buffering, no moderation logic: what the moderation job costs
beyond it is ours.

    python -m modstream.bench.floor_job --topic content.versions=bench-x.content.versions ... \
        --output bench-x.floor.out
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from pyflink.common import Row, Types, WatermarkStrategy
from pyflink.datastream import DataStream, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

from modstream.core.config import Settings
from modstream.jobs import options, runtime
from modstream.jobs.moderation import python_calls
from modstream.moderation.step import BROADCAST_TOPICS, KEYED_TOPICS


@python_calls.counted
class Touch(KeyedProcessFunction):
    """Decode, read the key's state, count, write it back, encode one output."""

    def __init__(self, output: str) -> None:
        self.output = output

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("floor", Types.STRING()))

    def process_element(self, value: Row, ctx: Any) -> Iterator[Row]:
        try:
            document = json.loads(value[2] or "")
        except ValueError:
            return
        stored = self.state.value()
        state = json.loads(stored) if stored else {"inputs": 0}
        state["inputs"] += 1
        state["ts"] = document.get("ts")
        self.state.update(json.dumps(state))
        out = {
            "content_id": document.get("content_id"),
            "ts": document.get("ts"),
            "inputs": state["inputs"],
        }
        yield Row(self.output, value[1], json.dumps(out))


def floor_source(
    name: str, doc: str | None, argv: list[str] | None
) -> tuple[argparse.Namespace, runtime.JobConfig, Any, DataStream]:
    """What both floors share: their options (`--output` the topic they write), job, Flink
    environment, and a Kafka source of every topic the moderation job reads: the keyed inputs and
    the broadcast ones (policy, hash banks, review grants), so a floor answers every event the
    workload writes, as the bench counts them."""
    parser = options.job_parser(name, doc)
    parser.add_argument("--output", required=True, help="the topic the floor writes")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    job = runtime.job_config(name, args, settings)
    env = runtime.create_env(job, settings)
    source = env.from_source(
        runtime.kafka_source(
            job, [job.topic(topic) for topic in (*KEYED_TOPICS, *BROADCAST_TOPICS)]
        ),
        WatermarkStrategy.no_watermarks(),
        "inputs",
        type_info=runtime.SOURCE_ROW,
    )
    return args, job, env, source


def main(argv: list[str] | None = None) -> int:
    args, job, env, source = floor_source("floor", __doc__, argv)
    # Keyed in Java, as the moderation job keys (runtime.keyed_by): one crossing a record.
    touched = runtime.keyed_by(source, runtime.SOURCE_ROW).process(
        Touch(args.output), output_type=runtime.SINK_ROW
    )
    touched.sink_to(runtime.kafka_sink(job))
    return runtime.run(env, job.name, detached=False)


if __name__ == "__main__":
    sys.exit(main())
