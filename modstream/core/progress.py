"""Progress of the long commands (`replay`, `reevaluate`, `dlq replay`, `demo`, `bench`), on
stderr only: stdout stays for what a command prints, `--json` lines included.

On a terminal, a rich progress bar (a spinner with the time so far when the total is unknown).
Elsewhere (CI, a pipe, a file) plain log lines through `logging` (modstream/core/logs.py, JSON with
`--log-format json`): one when a phase starts, then at most one every `every_s` seconds, and
one when the phase ends, so a CI log stays readable.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

LOG = logging.getLogger("modstream.core.progress")
T = TypeVar("T")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def line(done: int, total: int | None, elapsed_s: float, unit: str = "") -> str:
    """`done/total (pct), rate, ETA`: the rate is the mean so far, the ETA what is left at it.
    Without a total: `done unit, rate, elapsed`."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    unit = f" {unit}" if unit else ""
    if total is None:
        return f"{done}{unit} {rate:.1f}/s, {_duration(elapsed_s)} so far"
    pct = 100.0 * done / total if total else 100.0
    eta = _duration((total - done) / rate) if rate > 0 else "?"
    return f"{done}/{total}{unit} ({pct:.1f}%) {rate:.1f}/s ETA {eta}"


class Progress:
    """One command's progress through its phases. Use as a context manager:

    with Progress("replay") as shown:
        shown.phase("reading the input")
        for row in shown.track(rows, total=len(rows)): ...
        with shown.waiting("running the job"): env.execute()
    """

    def __init__(
        self,
        name: str,
        *,
        live: bool | None = None,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.every_s, self.clock = name, every_s, clock
        self.live = _terminal() if live is None else live
        self.text, self.unit = "", ""
        self.done = 0
        self.total: int | None = None
        self.started = self.shown = clock()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            self._bar = _rich_bar()
            self._bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def phase(self, text: str, total: int | None = None, unit: str = "") -> None:
        """A new phase: its own count (of `total`, when known) and clock."""
        self.text, self.total, self.unit, self.done = text, total, unit, 0
        self.started = self.shown = self.clock()
        if self._bar is not None:
            if self._task is not None:
                self._bar.update(self._task, visible=False)
            self._task = self._bar.add_task(f"{self.name}: {text}", total=total)
        else:
            extra = {"phase": text} if total is None else {"phase": text, "total": total}
            LOG.info("%s: %s", self.name, text, extra=extra)

    def update(
        self, done: int | None = None, *, advance: int = 0, total: int | None = None
    ) -> None:
        """The phase's count is now `done` (or grew by `advance`); `total` when learnt."""
        self.done = done if done is not None else self.done + advance
        if total is not None:
            self.total = total
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total)
            return
        now = self.clock()
        finished = self.total is not None and self.done >= self.total
        if now - self.shown >= self.every_s or finished:
            self.shown = now
            self._note(now)

    def _note(self, now: float) -> None:
        elapsed = now - self.started
        LOG.info(
            "%s: %s: %s",
            self.name,
            self.text,
            line(self.done, self.total, elapsed, self.unit),
            extra={"phase": self.text, "done": self.done}
            | ({} if self.total is None else {"total": self.total}),
        )

    def track(self, items: Iterable[T], total: int | None = None) -> Iterator[T]:
        """Each item of `items`, counted as it is handed on."""
        if total is not None:
            self.update(self.done, total=total)
        for item in items:
            yield item
            self.update(advance=1)

    def waiting(self, text: str) -> _Waiting:
        """A phase with no count (a blocking call): on a terminal a spinner, elsewhere a line
        every `every_s` seconds with the time so far."""
        return _Waiting(self, text)


class _Waiting:
    def __init__(self, progress: Progress, text: str) -> None:
        self.progress, self.text = progress, text
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self.progress.phase(self.text)
        if not self.progress.live:
            self.thread = threading.Thread(target=self._beat, name="progress", daemon=True)
            self.thread.start()
        return self.progress

    def _beat(self) -> None:
        while not self.stopping.wait(self.progress.every_s):
            elapsed = self.progress.clock() - self.progress.started
            LOG.info(
                "%s: %s (%s so far)",
                self.progress.name,
                self.text,
                _duration(elapsed),
                extra={"phase": self.text, "elapsed_s": round(elapsed, 1)},
            )

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()


def _terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _stdout_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _rich_bar() -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    return RichProgress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        # print() to a terminal goes above the bar; to a pipe or file it is left alone.
        redirect_stdout=_stdout_terminal(),
    )
