"""moderation, `--engine batched`: the retro join (modstream/moderation/rules/retro.py) behind
BatchedVersions.java, keyed by hash key, its Python called once per flush for every hash key made
ready since.

Its input is decode's hash-key rows (route `hash`, modstream/jobs/moderation/decode.py): an upload's
or a bank record's registration at one hash key, held by Java until the watermark passes its ts. Per
key, registrations run through the same functions as the PyFlink adapter `RetroJoin`
(modstream/jobs/moderation/hash_retro.py `joined`, `expired`) in event-time order, and its answer's
rows are the `moderation.retro` rows the version operator takes in, the DECODED_ROW fields as
`RetroJoin` emits them. The join is symmetric (an upload meets the additions after it, an addition
the uploads before it, whichever comes first) and an addition is dropped by its timer at its own ts,
which fires after every input of that ts: the pairs are those `RetroJoin` finds in arrival order,
for every upload not later than the watermark (a late one misses both ways).
"""

from __future__ import annotations

import json
from typing import Any

from modstream.jobs.moderation.hash_retro import expired, joined, retro_fields
from modstream.jobs.moderation.keyed_batch import Entry, KeyedBatch
from modstream.moderation import state_schema
from modstream.moderation.rules import retro

# The batched state's own field: the input seq of each registration and addition it holds,
# "v:<version key>" and "a:<bank event id>" (modstream/moderation/rules/retro.py leaves other fields
# alone).
SEQS = "seqs"


class BatchedRetro(KeyedBatch):
    """The retro join's Python side: a hash key's registrations and its timer."""

    operator = "retro_join"

    def on_input(self, key: str, ts: int, entries: list[Entry]) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for kind, payload, _, seq in entries:
            result = joined(self.stored(), key, kind, payload)
            if result is None:
                continue
            seqs = _seqs(result)
            own = _own(kind, payload)
            if own is not None:
                seqs.setdefault(own, int(seq))
            rows += self._kept(result, seqs, int(seq), "a:" if kind == "upload" else "v:")
        return rows

    def on_timer(self, key: str, ts: int) -> list[list[Any]]:
        result = expired(self.stored(), key, ts)
        return [] if result is None else self._kept(result, _seqs(result), 0, "")

    def _kept(
        self, result: retro.RetroResult, seqs: dict[str, int], seq: int, partner: str
    ) -> list[list[Any]]:
        """As `RetroJoin._store`: the key's new state, its timer, its retro rows. A row's seq
        is the later of its pair's (as `RetroJoin` emits it when the second arrives: in
        replay the seq is the line, in Kafka 0), whichever came first here."""
        if result.state is None:
            self.store(None)
        else:
            held = {f"v:{v[1]}\x1f{v[2]}" for v in result.state["versions"]}
            held |= {f"a:{a[1]}" for a in result.state["adds"]}
            kept = {name: at for name, at in seqs.items() if name in held}
            self.store(state_schema.dump({**result.state, SEQS: kept}).encode())
        for timer in result.timers:
            self.register_timer(timer)
        rows = []
        for record in result.outputs:
            other = record["bank_event_id"] if partner == "a:" else retro.version_key(record)
            later = max(seq, seqs.get(partner + other, 0))
            rows.append(list(retro_fields(record, later)))
        return rows


def _seqs(result: retro.RetroResult) -> dict[str, int]:
    """The seqs the loaded state held (its field taken out of the join's state)."""
    return dict(result.state.pop(SEQS, None) or {}) if result.state is not None else {}


def _own(kind: str, payload: str) -> str | None:
    """The name an upload or an addition is kept under in `SEQS` (a removal: none)."""
    document = json.loads(payload)
    if kind == "upload":
        return f"v:{document['content_id']}\x1f{document['content_version']}"
    return f"a:{document['event_id']}" if document["op"] == "add" else None
