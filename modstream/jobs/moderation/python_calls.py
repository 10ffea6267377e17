"""How often the JVM enters the job's Python: every call of an adapter's entry point
(`process_element`, `process_broadcast_element`, `on_timer`) counted in Python and added to the
operator's Flink counter `python_calls` at most every FLUSH_EVERY_S, so counting costs no
Python→Java call per record. `modstream bench` divides the sum of every `…python_calls` series
by the events read (`python_calls_per_event`, issue 26); a Java operator that calls Python in
batches registers its own counter under the same name and is summed with these.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

LOG = logging.getLogger("modstream.python_calls")

METRIC = "python_calls"
ENTRY_POINTS = ("process_element", "process_broadcast_element", "on_timer")
FLUSH_EVERY_S = 0.5

Adapter = TypeVar("Adapter", bound=type)


class PythonCalls:
    """One operator instance's count, handed to its Flink counter now and then."""

    def __init__(self, runtime_context: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pending = 0
        self.flushed_at = clock()
        self.counter: Any = None
        try:
            self.counter = runtime_context.get_metrics_group().counter(METRIC)
        except Exception as error:  # fakes in tests, or an engine without metrics
            LOG.info("python_calls: no counter (%s)", type(error).__name__)

    def add(self) -> None:
        self.pending += 1
        if self.clock() - self.flushed_at >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        if self.counter is not None and self.pending:
            self.counter.inc(self.pending)
        self.pending = 0
        self.flushed_at = self.clock()


def counted(adapter: Adapter) -> Adapter:
    """Count each call of `adapter`'s entry points; its `open` makes the counter."""
    original_open = adapter.open  # type: ignore[attr-defined]

    def open_counting(self: Any, runtime_context: Any) -> None:
        self._python_calls = PythonCalls(runtime_context)
        original_open(self, runtime_context)

    adapter.open = functools.wraps(original_open)(open_counting)  # type: ignore[attr-defined]
    for name in ENTRY_POINTS:
        method = getattr(adapter, name, None)
        if method is not None:
            setattr(adapter, name, _counting(method))
    return adapter


def _counting(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any) -> Any:
        calls = getattr(self, "_python_calls", None)
        if calls is not None:
            calls.add()
        return method(self, *args)

    return call
