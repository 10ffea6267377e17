"""The engine's own limit: the same Kafka source, keyed by the Kafka key, a Java
`KeyedProcessFunction` touching one `ValueState<byte[]>` per record (deploy/flink-ext
JavaFloor.java) and the same exactly-once Kafka sink and checkpoints, with no Python on the data
path. Submitted as every modstream job is (modstream/jobs/runtime.py: a local MiniCluster through
PyFlink's gateway), so the JVM, its settings and the jars are the moderation job's.

    python -m modstream.bench.java_floor --topic content.versions=bench-x.content.versions ... \
        --output bench-x.floor.out
"""

from __future__ import annotations

import sys

from pyflink.datastream import DataStream
from pyflink.java_gateway import get_gateway

from modstream.bench.floor_job import floor_source
from modstream.jobs import runtime


def main(argv: list[str] | None = None) -> int:
    args, job, env, source = floor_source("java-floor", __doc__, argv)
    flink = get_gateway().jvm.io.modstream.flink
    j_keyed = source._j_data_stream.keyBy(flink.FieldKey.selector(1), flink.FieldKey.keyType())
    j_touched = j_keyed.process(flink.JavaFloor(args.output), flink.JavaFloor.outputType())
    DataStream(j_touched.name("touch")).sink_to(runtime.kafka_sink(job))
    return runtime.run(env, job.name, detached=False)


if __name__ == "__main__":
    sys.exit(main())
