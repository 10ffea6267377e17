"""moderation, `--engine batched`: strikes and sanctions (modstream/enforcement/sanctions.py) behind
BatchedVersions.java, keyed by author, its Python called once per flush for every author made
ready since.

The version operator's `_sanctions` rows reach it as keyed input at `at`, the time that
operator emitted them (KeyedAt.java), so Java's hold-until-the-watermark is the buffer the
PyFlink adapter `Sanctions` keeps in a MapState: the decisions an author got at one `at` are
applied together when the watermark passes it, by the same function
(modstream/jobs/moderation/sanctions.py `settled`), and the account's own timers (strike expiry)
fire in event-time order between them. As in `Sanctions`, an account timer at a time that also had
decisions is that time's one timer: the decisions are applied, the timer does nothing more
(`KeyedBatch.input_is_timer`).
"""

from __future__ import annotations

import json
from typing import Any

from modstream.enforcement import sanctions
from modstream.jobs.moderation.keyed_batch import Entry, KeyedBatch
from modstream.jobs.moderation.sanctions import account_rows, settled
from modstream.moderation import state_schema

# The topic BatchedVersions.java gives the decisions `Sanctions` (the PyFlink engine's adapter)
# held in its buffer at one `at`, restored from its savepoint: one JSON list, "at" removed.
RESTORED_BUFFER = "_restored_buffer"


class BatchedSanctions(KeyedBatch):
    """The sanctions' Python side: an author's decisions at one time, and its timers."""

    operator = "sanctions"
    input_is_timer = True  # `Sanctions` applies an author's decisions on its timer at `at`

    def on_input(self, key: str, ts: int, entries: list[Entry]) -> list[list[Any]]:
        decisions = []
        for topic, value, _, _ in entries:
            if topic == RESTORED_BUFFER:  # `Sanctions`' buffer at ts, from its savepoint
                decisions += json.loads(value)
                continue
            entry = json.loads(value)
            entry.pop("at", None)
            decisions.append(entry)
        return self._settle(key, ts, decisions)

    def on_timer(self, key: str, ts: int) -> list[list[Any]]:
        return self._settle(key, ts, None)

    def _settle(self, key: str, ts: int, decisions: list[dict[str, Any]] | None) -> list[list[Any]]:
        result, letters = settled(self.config, self.metrics, self.stored(), key, ts, decisions)
        rows = [list(letter) for letter in letters]
        if result is not None:
            rows += self._kept(result)
        return rows

    def _kept(self, result: sanctions.SanctionResult) -> list[list[Any]]:
        """As `Sanctions`: the author's new state, its timers, its account actions."""
        self.store(None if result.state is None else state_schema.dump(result.state).encode())
        for timer in result.timers:
            self.register_timer(timer)
        return [list(row) for row in account_rows(self.config, result)]
