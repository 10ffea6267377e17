"""Which language identifier modstream uses (issue 28 item 3): langid, its fork py3langid and
lingua (high and low accuracy modes), on the short texts modstream moderates
(modstream/bench/language_samples.py: the demo's texts, the workload's, transcripts, and posts of
three to ten words in thirteen other languages).

    make bench-language              # or: python -m modstream.bench.language --help

Each identifier runs in a process of its own (its memory is its own) and prints one JSON line:
- `load_s`: building it, its models loaded (what a scan job pays in `open()`);
- `rss_mib`: the process's resident memory growth from building it and identifying every sample;
- `accuracy`: the share of labelled samples whose most likely language is the label;
- per confidence floor: `named` (the share of labelled samples it names a language for, its
  confidence at or over the floor), `precision` (the share of those named right) and
  `undetermined_named` (how many of the samples that have no language it names one for);
- `us_per_call`: the median over `--repeats` passes of the CPU time of one call on one text,
  the mean over the samples (this process, all its threads: `time.process_time`, so a machine
  shared with other work does not inflate it; the first pass, caches warming, left out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from modstream.bench.language_samples import UNDETERMINED_SAMPLES, labelled

Identify = Callable[[str], tuple[str, float]]  # text -> (ISO 639-1 code, confidence in [0, 1])
FLOORS = (0.0, 0.3, 0.5, 0.7, 0.9)


def _langid() -> Identify:
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    return lambda text: _pair(identifier.classify(text))


def _py3langid() -> Identify:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return lambda text: _pair(identifier.classify(text))


def _pair(found: tuple[str, float]) -> tuple[str, float]:
    return str(found[0]), float(found[1])


def _lingua(low_accuracy: bool) -> Callable[[], Identify]:
    def build() -> Identify:
        from lingua import LanguageDetectorBuilder

        builder = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models()
        detector = (builder.with_low_accuracy_mode() if low_accuracy else builder).build()

        def identify(text: str) -> tuple[str, float]:
            values = detector.compute_language_confidence_values(text)
            if not values or values[0].value <= 0:
                return "und", 0.0
            best = values[0]
            return best.language.iso_code_639_1.name.lower(), float(best.value)

        return identify

    return build


IDENTIFIERS: dict[str, Callable[[], Identify]] = {
    "langid": _langid,
    "py3langid": _py3langid,
    "lingua": _lingua(low_accuracy=False),
    "lingua-low": _lingua(low_accuracy=True),
}


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def measure(name: str, repeats: int) -> dict[str, object]:
    """One identifier's figures (see the module docstring)."""
    before = _rss_kib()
    started = time.perf_counter()
    try:
        identify = IDENTIFIERS[name]()
    except ImportError as missing:  # the peers are not dependencies: `make bench-language`
        return {"identifier": name, "missing": str(missing)}
    load_s = time.perf_counter() - started
    samples = labelled()
    found = [identify(text) for text, _ in samples]
    odd = [identify(text) for text in UNDETERMINED_SAMPLES]
    rss_mib = (_rss_kib() - before) / 1024
    right = [code == language for (code, _), (_, language) in zip(found, samples, strict=True)]
    floors = {}
    for floor in FLOORS:
        named = [
            ok for ok, (_, confidence) in zip(right, found, strict=True) if confidence >= floor
        ]
        floors[str(floor)] = {
            "named": round(len(named) / len(samples), 3),
            "precision": round(sum(named) / len(named), 3) if named else None,
            "undetermined_named": sum(1 for _, confidence in odd if confidence >= floor),
        }
    texts = [text for text, _ in samples]
    passes = []
    for _ in range(repeats + 1):
        started = time.process_time()
        for text in texts:
            identify(text)
        passes.append((time.process_time() - started) / len(texts) * 1e6)
    wrong = [
        f"{language}->{code}"
        for (code, _), (_, language), ok in zip(found, samples, right, strict=True)
        if not ok
    ]
    return {
        "identifier": name,
        "samples": len(samples),
        "load_s": round(load_s, 2),
        "rss_mib": round(rss_mib, 1),
        "accuracy": round(sum(right) / len(samples), 3),
        "floors": floors,
        "us_per_call": round(statistics.median(passes[1:]), 1),
        "wrong": wrong,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--identifier", choices=sorted(IDENTIFIERS), action="append")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args(argv)
    names = args.identifier or list(IDENTIFIERS)
    if args.one:
        print(json.dumps(measure(names[0], args.repeats)), flush=True)
        return
    for name in names:  # each in its own process: its memory and its load are its own
        command = [sys.executable, "-m", "modstream.bench.language", "--one"]
        subprocess.run([*command, "--identifier", name, "--repeats", str(args.repeats)], check=True)


if __name__ == "__main__":
    main()
