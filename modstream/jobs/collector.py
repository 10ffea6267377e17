"""The garbage collector of the interpreter our batched operators' Python runs in (the one
embedded in the TaskManager, or a worker process: modstream/jobs/worker.py), set by each handler
as Java makes it (`settle`).

CPython's cyclic collector runs its youngest generation every 700 allocations (net of frees),
the next every 10 of those, and the whole heap every 10 of those again. Each run walks every
object of the generations it collects. In the job's interpreter the old generation is large:
PyFlink and the libraries it imports, the configuration and policies, and the states kept
decoded (modstream/moderation/state_schema.py `DecodedStates`), which every firing renews, so
they keep reaching the old generation and bringing on whole-heap runs. `perf` on the job in
`modstream bench --steady --variants modstream` found the collector at 8.6% of the version
operator's thread (docs/BENCHMARKS.md, stop 51). Two settings cut that:
- what exists once a handler is made (modules, classes, the configuration) is frozen: moved to
  a generation no run walks again (`gc.freeze`), as a forking server does;
- the generations are run less often (`THRESHOLDS`). The per-version code makes few cycles (an
  exception set aside with its traceback is one), so garbage waits a little longer; reference
  counting still frees everything else at once.

The bench's peers run Python's defaults: they are what a team writes by hand (docs/BENCHMARKS.md
says what the same settings change for them).
"""

from __future__ import annotations

import gc

# (youngest, middle, oldest): the youngest every 20,000 allocations, the middle every 20 of
# those, the whole heap every 100 of those (about every 40 million allocations, some seconds of
# a busy job) unless CPython's own rule (a quarter of the old generation new) holds it off.
THRESHOLDS = (20_000, 20, 100)


def settle() -> None:
    """Freeze what this interpreter holds now and run its collector at `THRESHOLDS`. Each
    handler calls it once made; a second call freezes the second handler's objects too."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
