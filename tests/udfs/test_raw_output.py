"""Raw detector output kept as evidence (modstream/detectors/raw_output.py, issue 28 item 5): a
private file per result, referenced from the result, deleted after its retention."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from modstream.detectors.raw_output import DAY_MS, RawOutputStore
from modstream.detectors.scan import scan_batch
from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import handle_batch
from modstream.testing.records import T0
from modstream.testing.scans import Counting, Reading, loader, request


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def result(event_id: str = "scan-a-m-ok", ts: int = T0) -> dict[str, Any]:
    return {"event_id": event_id, "detector": "ocr_text", "model_version": "m-1", "ts": ts}


def test_a_kept_output_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = RawOutputStore(tmp_path / "raw")
        ref = store.keep(result(), [{"text": "words read", "confidence": 0.9}])
    finally:
        os.umask(old)
    path = store.path(ref)
    assert ref.startswith("raw://2025-11-30/") and path.is_file()
    assert mode(tmp_path / "raw") == mode(path.parent) == 0o700 and mode(path) == 0o600
    kept = json.loads(path.read_text())
    assert kept["raw"] == [{"text": "words read", "confidence": 0.9}]
    assert kept["event_id"] == "scan-a-m-ok" and kept["detector"] == "ocr_text"
    assert store.keep(result(), [1.0]) == ref  # the same result made again: the same file


def test_a_reference_names_a_file_inside_the_store_or_nothing(tmp_path: Path) -> None:
    store = RawOutputStore(tmp_path)
    for bad in ("file:///etc/passwd", "raw://../x.json", "raw://2025-11-30/../../x.json"):
        with pytest.raises(ValueError):
            store.path(bad)


def test_days_past_the_retention_are_deleted_as_the_store_writes(tmp_path: Path) -> None:
    store = RawOutputStore(tmp_path, retention_ms=2 * DAY_MS)
    old = store.path(store.keep(result("old", T0), {}))
    recent = store.path(store.keep(result("recent", T0 + 2 * DAY_MS), {}))
    (tmp_path / "not-a-day").mkdir()
    store.keep(result("later", T0 + 3 * DAY_MS), {})  # a new day: the first write purges
    assert not old.exists() and recent.exists() and (tmp_path / "not-a-day").exists()
    assert store.purge(T0 + 10 * DAY_MS) == 2  # both remaining days, when called


def test_ok_results_reference_their_raw_output_and_nothing_else_does(tmp_path: Path) -> None:
    store = RawOutputStore(tmp_path)
    [read] = scan_batch(Reading(), [request("a", "x")], loader, T0, keep_raw=store.keep).results
    kept = json.loads(store.path(read["raw_output_ref"]).read_text())
    assert kept["raw"] == {"scores": {"offensive": 0.9}}  # no raw output handed: its scores
    outcome = scan_batch(
        Counting(), [request("b", "corrupt"), request("c", None)], loader, T0, keep_raw=store.keep
    )
    assert all("raw_output_ref" not in r for r in outcome.results)  # errors keep nothing


def test_a_store_that_fails_costs_the_reference_not_the_result() -> None:
    def full(record: dict[str, Any], raw: Any) -> str:
        raise OSError(28, "No space left on device")

    [answered] = scan_batch(Counting(), [request("a", "x")], loader, T0, keep_raw=full).results
    assert answered["status"] == "ok" and "raw_output_ref" not in answered


def test_the_scan_job_keeps_raw_output_only_when_given_a_directory(tmp_path: Path) -> None:
    topics = {"scan.requests.text": "p.text", "detector.results": "p.results"}
    rows = [("p.text", "c-a", json.dumps(request("a", "fine")))]
    for directory in (None, str(tmp_path / "raw")):
        config = ScanConfig(topics=topics, raw_output_dir=directory)
        handled = handle_batch(config, rows, T0, lambda _: Counting())
        [value] = [
            json.loads(v)
            for t, v in zip(handled.topics, handled.values, strict=True)
            if t == "p.results"
        ]
        assert ("raw_output_ref" in value) == (directory is not None)


def test_the_scan_config_with_a_store_pickles_as_the_job_ships_it(tmp_path: Path) -> None:
    """`python -m modstream.jobs.scan.job` runs the module as __main__: cloudpickle ships the
    config's class by value, so nothing on it may hold a lock (a cached_property does)."""
    import cloudpickle

    import modstream.jobs.scan.job

    config = ScanConfig(topics={}, raw_output_dir=str(tmp_path))
    assert config.raw_outputs is not None  # opened once used
    cloudpickle.register_pickle_by_value(modstream.jobs.scan.job)
    try:
        shipped = cloudpickle.loads(cloudpickle.dumps(config))
    finally:
        cloudpickle.unregister_pickle_by_value(modstream.jobs.scan.job)
    assert shipped.raw_outputs is config.raw_outputs  # one store per directory and process


def test_the_console_reads_a_kept_file_without_changing_the_store(tmp_path: Path) -> None:
    from modstream.detectors.raw_output import read_kept

    store = RawOutputStore(tmp_path / "raw")
    ref = store.keep(result(), [{"text": "words read", "confidence": 0.9, "box": [1, 2, 3, 4]}])
    os.chmod(tmp_path / "raw", 0o500)  # read-only for the reader: it makes and changes nothing
    try:
        body = read_kept(tmp_path / "raw", ref)
    finally:
        os.chmod(tmp_path / "raw", 0o700)
    assert body["event_id"] == "scan-a-m-ok" and body["raw"][0]["text"] == "words read"
    with pytest.raises(ValueError, match="more than 10 bytes"):
        read_kept(tmp_path / "raw", ref, max_bytes=10)
    with pytest.raises(FileNotFoundError):  # a day the retention deleted
        read_kept(tmp_path / "raw", ref.replace("2025-11-30", "2025-11-01"))
    with pytest.raises(ValueError):
        read_kept(tmp_path / "raw", "raw://2025-11-30/../../etc/passwd")


def test_the_console_follows_no_link_in_the_store(tmp_path: Path) -> None:
    from modstream.detectors.raw_output import read_kept

    store = RawOutputStore(tmp_path / "raw")
    ref = store.keep(result(), [])
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"raw": "not the store\'s"}')
    path = store.path(ref)
    path.unlink()
    path.symlink_to(secret)
    with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP
        read_kept(tmp_path / "raw", ref)
    (tmp_path / "other-day").mkdir()
    (tmp_path / "other-day" / path.name).write_text("{}")
    (tmp_path / "raw" / "2025-12-01").symlink_to(tmp_path / "other-day")
    with pytest.raises(ValueError, match="symlink"):
        read_kept(tmp_path / "raw", f"raw://2025-12-01/{path.name}")
