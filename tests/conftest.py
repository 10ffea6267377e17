"""The suite's own settings: the stack it uses and the order `make test` runs it in.

Tests default to the same ports and run directory as `make test` (19092/19093/16379 in
.run/test), so a plain `pytest` never touches a stack started with `make up`, and to its
signing setup: every authority topic requires signatures, keys derived from one dev secret
(modstream/testing/records.py `TEST_SIGNING_ENV`). The builders and shared fixtures are shipped
with the code, in modstream.testing (docs/TESTING.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modstream.testing.records import TEST_SIGNING_ENV

ROOT = Path(__file__).resolve().parent.parent
# `make test` hands its two workers one test at a time (pytest-xdist, --maxschedchunk 1); the
# slowest files (the CI's --durations) start first and the other integration tests next, so no
# worker is left running a long test alone at the end.
SLOWEST_FIRST = (
    "tests/integration/test_faults.py",
    "tests/integration/test_moderation_job.py",
    "tests/integration/test_demo.py",
    "tests/integration/test_secured_stack.py",
    "tests/integration/test_backlog.py",
    "tests/integration/test_event_time.py",
    "tests/integration/test_cluster.py",
    "tests/integration/test_restore.py",
    "tests/integration/test_engine_migration.py",
    "tests/integration/test_scan.py",
    "tests/integration/test_second_review.py",
    "tests/integration/test_console.py",
    "tests/integration/test_retention.py",
    "tests/integration/test_ingest_job.py",
    "tests/integration/test_archive_lifecycle.py",
    "tests/integration/test_policy_backtest.py",
)
for _name, _default in {
    "MODSTREAM_RUN_DIR": str(ROOT / ".run" / "test"),
    "MODSTREAM_KAFKA_PORT": "19092",
    "MODSTREAM_KAFKA_CONTROLLER_PORT": "19093",
    "MODSTREAM_REDIS_PORT": "16379",
    **TEST_SIGNING_ENV,
    # A developer's modstream.toml (their own broker, say) is not the tests' business.
    "MODSTREAM_CONFIG": "none",
}.items():
    os.environ.setdefault(_name, _default)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}

    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), 0 if item.get_closest_marker("integration") else 1

    items.sort(key=order)  # stable: within a rank, pytest's own order
