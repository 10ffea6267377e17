"""Files as a bounded job's sink: `modstream replay` writes each output topic's records to
`<out_dir>/<topic>.jsonl` from inside the job (jobs/runtime.py holds the Kafka ends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyflink.datastream import DataStream, ProcessFunction, RuntimeContext
from pyflink.java_gateway import get_gateway


class _FileWriter(ProcessFunction):
    """Appends each Row(topic, key, value)'s value as one line of `<out_dir>/<topic>.jsonl`,
    inside the job: fetching each row back to the client (`execute_and_collect`) costs several
    py4j round trips a row and was most of a replay's time (docs/BENCHMARKS.md, "Replay")."""

    def __init__(self, out_dir: str, skip_prefix: str) -> None:
        self.out_dir = out_dir
        self.skip_prefix = skip_prefix

    def open(self, runtime_context: RuntimeContext) -> None:
        self.files: dict[str, Any] = {}

    def process_element(self, value: Any, ctx: Any) -> Any:
        topic = value[0]
        if not (self.skip_prefix and topic.startswith(self.skip_prefix)):
            lines = self.files.get(topic)
            if lines is None:
                lines = self.files[topic] = open(  # noqa: SIM115 (closed in close())
                    Path(self.out_dir) / f"{topic}.jsonl", "w", encoding="utf-8"
                )
            lines.write(value[2] + "\n")
        return iter(())

    def close(self) -> None:
        for lines in getattr(self, "files", {}).values():
            lines.close()


def write_files(stream: DataStream, out_dir: Path, skip_prefix: str = "") -> None:
    """A bounded job's sink: every row's value, one line each, in `<out_dir>/<topic>.jsonl`
    (one writer, so each file holds its rows in the order they reached it); topics starting
    with `skip_prefix` are dropped. The job must run where `out_dir` is (a local MiniCluster)."""
    written = (
        stream.process(_FileWriter(str(out_dir.resolve()), skip_prefix))
        .set_parallelism(1)
        .name("write files")
    )
    jvm = get_gateway().jvm
    written._j_data_stream.sinkTo(
        jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ).setParallelism(1).name("end")
