"""The batched engine's decode (modstream/jobs/moderation/decode.py `decoded`, BatchedDecode.java's
Python side) against the PyFlink engine's: `Decode.fields` makes plain tuples and reads an upload's
hash-key registrations from the record it admitted, where the PyFlink path makes Rows and parses
the row's JSON again (`fan_out`). On the demo workload (every modality, deletes, reports, a
hash-bank entry, a signed policy, malformed lines) both give the same rows. No JVM."""

from __future__ import annotations

import json
from typing import Any

from modstream.bench.fire import step_records
from modstream.demo.workload import generate
from modstream.jobs.moderation.config import DLQ_ROUTE, ENGINE_BATCHED, HASH_ROUTE, ModerationConfig
from modstream.jobs.moderation.decode import Decode, decoded
from modstream.jobs.moderation.hash_retro import fan_out
from modstream.jobs.moderation.letters import DLQ_TAG
from modstream.testing.records import TEST_KEYRING, delete, upload
from modstream.testing.versions import image


def pyflink_rows(decoder: Decode, records: list[tuple[str, str]]) -> list[list[Any]]:
    """What the PyFlink engine's Decode and fan-out make of `records`, as `decoded` lists them."""
    rows: list[list[Any]] = []
    for seq, (physical, raw) in enumerate(records):
        item = decoder.decode(physical, None, raw, 0, "lane", seq)
        if isinstance(item, tuple):
            tag, letter = item
            assert tag is DLQ_TAG
            rows.append([DLQ_ROUTE, letter[1], letter[0], letter[2], 0, 0, ""])
            continue
        rows.append(list(item))
        rows.extend([HASH_ROUTE, *entry, ""] for entry in fan_out(item))
    return rows


def test_the_batched_decode_gives_the_pyflink_engines_rows_and_hash_keys() -> None:
    config = ModerationConfig(keyring=TEST_KEYRING, engine=ENGINE_BATCHED)
    records = step_records(generate(seed=11, versions=300))
    # Images with a perceptual hash (the demo's uploads have none), one without, a delete.
    records += [
        ("content.versions", json.dumps(upload(f"p-{n}", phash=f"{n:016x}", **image())))
        for n in range(3)
    ] + [("content.versions", json.dumps(delete("p-0")))]
    batched = decoded(Decode(config), [
        (physical, None, raw, 0, "lane", seq) for seq, (physical, raw) in enumerate(records)
    ])  # fmt: skip
    expected = pyflink_rows(Decode(config), records)
    assert batched == expected
    routes = {row[0] for row in batched}
    assert {"keyed", "broadcast", DLQ_ROUTE, HASH_ROUTE} <= routes  # the mix reaches each path
    uploads = sum(1 for row in batched if row[0] == HASH_ROUTE and row[2] == "upload")
    assert uploads >= 300  # every upsert registers at least its sha256
    assert any(row[0] == HASH_ROUTE and row[1].startswith("phash:") for row in batched)
