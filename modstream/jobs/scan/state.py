"""The scan operator's `waiting` keyed state (modstream/jobs/scan/job.py `Scan`): one entry per
arrival (a batch the Batcher handed over), so a dispatch rewrites only the arrivals it took rows
from, and a restore admits them again oldest first with when each request arrived (its budget counts
from then, modstream/scanning/admission.py)."""

from __future__ import annotations

import json
from typing import Any

Row3 = tuple[str, str | None, str | None]  # (physical topic, key, value)
# Per arrival: row index -> (row, when it arrived in ms), as `waiting` keeps them.
ArrivalRows = dict[int, tuple[Row3, int]]


def record_times(value: Any, count: int) -> list[int | None]:
    """The Kafka record timestamps the Batcher passes along (`arrivals[]`, epoch ms as text);
    None where there is none (a batch without the field, a restored older buffer)."""
    if len(value) < 4 or value[3] is None:
        return [None] * count
    return [int(at) if at else None for at in value[3]]


def stored(rows: ArrivalRows) -> str:
    """One `waiting` entry: [[rows], [indexes], [arrived ms]]."""
    return json.dumps(
        [[list(row) for row, _ in rows.values()], list(rows), [at for _, at in rows.values()]]
    )


def restored(raw: str) -> tuple[list[Row3], list[int | None]]:
    """A `waiting` entry's rows and arrival times (None for entries written before they were
    kept: those count from the restore)."""
    entry = json.loads(raw)
    rows = [(row[0], row[1], row[2]) for row in entry[0]]
    return rows, entry[2] if len(entry) > 2 else [None] * len(rows)


def arrival_order(arrival: str) -> tuple[int, int]:
    """An arrival id `<ms>-<sequence>` as sortable numbers."""
    at, _, sequence = arrival.partition("-")
    try:
        return int(at), int(sequence)
    except ValueError:
        return 0, 0
