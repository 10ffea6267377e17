"""Benchmarks sign their workloads as the test stack does (Makefile TEST_ENV) unless the caller
gave keys of its own: the jobs require signatures on every authority topic by default (issue 27,
docs/RELIABILITY.md, "Signed authority inputs"), so an unsigned workload would be dead-lettered,
not measured. The benchmarks' stacks are local (the dev secret is refused beside brokers that are
not)."""

from __future__ import annotations

import os

if not (
    os.environ.get("MODSTREAM_SIGNING_DEV_SECRET") or os.environ.get("MODSTREAM_SIGNING_KEYS_FILE")
):
    os.environ["MODSTREAM_SIGNING_DEV_SECRET"] = "modstream-test-signing"
