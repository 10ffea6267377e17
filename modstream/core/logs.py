"""One logging setup for every `modstream` command and every job: stdlib `logging` rendered by
structlog, as readable text (the default) or one JSON object a line (`--log-format json`,
MODSTREAM_LOG_FORMAT=json, or `log_format = "json"` in modstream.toml; docs/CONFIG.md).

Logs go to stderr; stdout stays for what a command prints (tables, summaries, `--json`) and for
the jobs' `job NAME ID running` lines, which tests and the demo read. Existing `LOG = logging.
getLogger(...)` calls need no change: a ProcessorFormatter on the root handler gives every record
the same fields (`timestamp`, `level`, `logger`, `event`, and `job` or `command`). Every line
leaves with the process's secret values masked, whatever field they came in (modstream/
redaction.py).

`configure` also exports the format and level to the environment, so processes started from
here (the demo's jobs) log the same way. What a job's operators log runs in the interpreter
Flink embeds in its JVM (thread mode): PyFlink sends those records to Flink's log4j, the job's
`RUN_DIR/flink/logs/flink-JOB-PID-python-vm.log`, in Flink's format (docs/CONFIG.md).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor

from modstream.core import redaction

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ENV_FORMAT = "MODSTREAM_LOG_FORMAT"
ENV_LEVEL = "MODSTREAM_LOG_LEVEL"
HANDLER_NAME = "modstream"


class _Stderr(logging.StreamHandler[TextIO]):
    """A handler writing to whatever `sys.stderr` is when a record comes (pytest's capture,
    rich's live display), not the stream of the moment it was made."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def _fields(static: Mapping[str, str]) -> Processor:
    """Adds the process's own fields (`job` or `command`) to every record."""

    def add(_logger: Any, _method: str, event_dict: EventDict) -> EventDict:
        for key, value in static.items():
            event_dict.setdefault(key, value)
        return event_dict

    return add


def _shared(static: Mapping[str, str]) -> list[Processor]:
    """What every record gets, from stdlib `logging` or from structlog."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _fields(static),
    ]


class _Redacting(structlog.stdlib.ProcessorFormatter):
    """Every rendered line, traceback included, with the process's secret values masked
    (modstream/core/redaction.py): a secret reaches a log through messages nobody wrote for it
    (an exception naming a URL, a client's configuration)."""

    def format(self, record: logging.LogRecord) -> str:
        return redaction.current().text(super().format(record))


def _formatter(as_json: bool, static: Mapping[str, str]) -> structlog.stdlib.ProcessorFormatter:
    renderer: Processor = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if as_json
        # Plain tracebacks: rich's (the default when rich is installed) renders every frame's
        # locals, thousands of lines for one py4j error, and a job's client took seconds to exit
        # after its JVM died (tests/integration/test_enforce.py: an intent's TTL ran out).
        else structlog.dev.ConsoleRenderer(
            colors=False, pad_event_to=0, exception_formatter=structlog.dev.plain_traceback
        )
    )
    tail: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        tail.append(structlog.processors.format_exc_info)  # the traceback as one string field
    return _Redacting(foreign_pre_chain=_shared(static), processors=[*tail, renderer])


def configure(
    as_json: bool = False, level: str | int = "INFO", *, export: bool = True, **static: str
) -> None:
    """Route the root logger (and structlog's loggers) to stderr in one format; `static` fields
    (`job="moderation"`, `command="replay"`) go on every record. Calling it again replaces the
    earlier setup. `export`: children of this process inherit the format and level."""
    handler = _Stderr()
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(_formatter(as_json, static))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    # `level` is modstream's (every logger here is `modstream.*`); the libraries' INFO lines
    # (kafka-python's connections, py4j's) stay out unless they are warnings.
    own = logging.getLogger("modstream")
    own.setLevel(level.upper() if isinstance(level, str) else level)
    root.setLevel(max(logging.WARNING, own.level))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(static),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    if export:
        os.environ[ENV_FORMAT] = "json" if as_json else "text"
        os.environ[ENV_LEVEL] = logging.getLevelName(own.level)


def configure_job(job: str, settings: Any) -> None:
    """A job's main: its settings' format and level, `job` on every record."""
    configure(settings.log_format == "json", settings.log_level, job=job)


def get(name: str) -> Any:
    """A structlog logger (key-value fields: `get(__name__).info("sent", records=12)`)."""
    return structlog.stdlib.get_logger(name)
