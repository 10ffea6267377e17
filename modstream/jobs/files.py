"""Files as a bounded job's sink: `modstream replay` writes each output topic's records to
`<out_dir>/<topic>.jsonl` from inside the job (modstream/jobs/runtime.py holds the Kafka ends)."""

from __future__ import annotations

from pathlib import Path

from pyflink.datastream import DataStream
from pyflink.java_gateway import get_gateway


def write_files(stream: DataStream, out_dir: Path, skip_prefix: str = "") -> None:
    """A bounded job's sink: every row's value, one line each, in `<out_dir>/<topic>.jsonl`
    (one writer, TopicFiles.java, so each file holds its rows in the order they reached it);
    topics starting with `skip_prefix` are dropped. The job must run where `out_dir` is (a
    local MiniCluster). Written inside the job, in Java: fetching each row back to the client
    (`execute_and_collect`) cost several py4j round trips a row, and a Python writer a Python
    call a row (docs/BENCHMARKS.md, "Replay")."""
    jvm = get_gateway().jvm
    written = (
        stream._j_data_stream.process(
            jvm.io.modstream.flink.TopicFiles(str(out_dir.resolve()), skip_prefix),
            stream._j_data_stream.getType(),
        )
        .setParallelism(1)
        .name("write files")
    )
    written.sinkTo(
        jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ).setParallelism(1).name("end")
