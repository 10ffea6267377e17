"""modstream/jobs/moderation/python_calls.py: each entry of an adapter counted, handed to its Flink
counter at most every FLUSH_EVERY_S (no Java call per record), and nothing breaks without a
runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from modstream.jobs.moderation import python_calls


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.incs = 0

    def inc(self, n: int = 1) -> None:
        self.count += n
        self.incs += 1


class Group:
    def __init__(self) -> None:
        self.made: dict[str, Counter] = {}

    def counter(self, name: str) -> Counter:
        return self.made.setdefault(name, Counter())


class Context:
    def __init__(self) -> None:
        self.group = Group()

    def get_metrics_group(self) -> Group:
        return self.group


class Base:
    def open(self, runtime_context: Any) -> None:
        self.opened = True

    def process_element(self, value: int, ctx: Any) -> Iterator[int]:
        yield value * 2


@python_calls.counted
class Adapter(Base):
    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[int]:
        yield timestamp


def test_entry_points_are_counted_and_flushed_now_and_then() -> None:
    now = [0.0]
    context = Context()
    adapter = Adapter()
    adapter.open(context)
    assert adapter.opened
    adapter._python_calls.clock = lambda: now[0]  # type: ignore[attr-defined]
    adapter._python_calls.flushed_at = 0.0  # type: ignore[attr-defined]
    for value in range(10):
        assert list(adapter.process_element(value, None)) == [value * 2]
    counter = context.group.made[python_calls.METRIC]
    assert counter.count == 0  # not yet: no Java call per record
    now[0] = python_calls.FLUSH_EVERY_S
    assert list(adapter.on_timer(5, None)) == [5]
    assert (counter.count, counter.incs) == (11, 1)


def test_the_base_class_is_left_alone_and_no_runtime_is_no_error() -> None:
    assert list(Base().process_element(2, None)) == [4]
    assert list(Adapter().process_element(3, None)) == [6]  # never opened: not counted
    calls = python_calls.PythonCalls(object())  # no metric group
    calls.add()
    calls.flush()
    assert calls.pending == 0


def test_the_moderation_job_adapters_are_counted() -> None:
    from modstream.jobs.moderation.hash_retro import RetroJoin
    from modstream.jobs.moderation.moderate import Moderate
    from modstream.jobs.moderation.reports import ReportCombine, ReportGate
    from modstream.jobs.moderation.sanctions import Sanctions

    for adapter in (Moderate, ReportGate, ReportCombine, Sanctions, RetroJoin):
        assert adapter.process_element.__wrapped__ is not None, adapter  # type: ignore[attr-defined]


def test_a_counted_adapter_pickles_by_value_as_pyflink_ships_it() -> None:
    """PyFlink cloudpickles a job's functions; a class defined where no worker can import it
    (the `__main__` of `python -m modstream.bench.floor_job`, here a function's body) travels
    by value, with the methods `counted` put on it. Compiled by mypyc, those methods were
    objects cloudpickle refuses (`__mypyc_attrs__`), and the PyFlink floor never started."""
    import cloudpickle

    @python_calls.counted
    class Local(Base):
        pass

    shipped = cloudpickle.loads(cloudpickle.dumps(Local))
    context = Context()
    adapter = shipped()
    adapter.open(context)
    assert list(adapter.process_element(4, None)) == [8]
    adapter._python_calls.flush()
    assert context.group.made[python_calls.METRIC].count == 1
