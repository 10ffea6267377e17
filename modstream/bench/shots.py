"""Shot-aware video sampling against every N-th frame: recall of a short planted shot, and
frames scored (issue 28 item 4; docs/scanning.md, "Video").

    python -m modstream.bench.shots --videos 30        (make bench-shots)

Each generated video (PyAV, H.264 by libx264 with its default keyframe placement: a keyframe
at most every 250 frames and at scene cuts) is 20 s at 25 fps, 128x128: shots of 2 to 5 s, each
a dark background panning slowly (motion within a shot), and one planted shot of
`--shot-ms` (skin-toned blobs, tests/udfs/frames.py: `flagged`) at a random time. The video is
one segment. `--planted overlay` plants a patch (a quarter of the width) over the running shot
instead, without a cut: what a scene detector cannot see. The scorer is a stand-in that flags
exactly the planted frames (bright pixels; the backgrounds are dark), so the figures are the
sampler's recall alone: a video
counts as found when a frame of the planted shot was scored. A model's own recall on the frames
it sees multiplies it. Prints, per sampling, recall per planted-shot length, the share of
frames scored and the CPU time of decoding and choosing per video (scoring excluded).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from modstream.detectors.video import Sampling, encode, segment_scores
from modstream.testing.media import background, flagged

FPS = 25
SECONDS = 20
SIZE = 128
SAMPLINGS: dict[str, Sampling] = {
    "every frame": Sampling(),
    "every 5th": Sampling(sample_every=5),
    "every 25th (1/s)": Sampling(sample_every=25),
    "every 50th (1/2s)": Sampling(sample_every=50),
    "shots, sample_ms 0": Sampling(shots=True, every_ms=0),
    "shots, sample_ms 2000": Sampling(shots=True, every_ms=2000),
    "shots, sample_ms 1000": Sampling(shots=True, every_ms=1000),
}


def frames_of(
    rng: random.Random, shot_ms: int, overlay: bool = False
) -> tuple[list[Image.Image], range]:
    """20 s of panning shots with one planted shot of `shot_ms`, or with `overlay` a planted
    patch (a quarter of the width) over the running shot for `shot_ms`, without a cut; the
    planted frames' range."""
    total = FPS * SECONDS
    planted_frames = max(1, round(shot_ms * FPS / 1000))
    start = rng.randrange(FPS, total - planted_frames - FPS)
    planted = range(start, start + planted_frames)
    frames: list[Image.Image] = []
    shot_seed, shot_end = rng.randrange(10**6), 0
    backdrop = background(shot_seed, size=SIZE * 2)
    flag = flagged(SIZE * 2)
    patch = flagged(SIZE // 4)
    for number in range(total):
        if number >= shot_end:
            shot_seed, shot_end = rng.randrange(10**6), number + rng.randrange(2 * FPS, 5 * FPS)
            backdrop = background(shot_seed, size=SIZE * 2)
        source = flag if number in planted and not overlay else backdrop
        offset = (number % FPS) * 2  # a slow pan: motion within the shot
        frame = source.crop((offset, offset, offset + SIZE, offset + SIZE))
        if overlay and number in planted:
            frame.paste(patch, (SIZE // 2, SIZE // 2))
        frames.append(frame)
    return frames, planted


def planted_scorer(frames: Sequence[Image.Image]) -> list[float]:
    """1 for a frame with the planted shot or patch in it (bright pixels over 3% of it), 0 for
    a background (dark throughout)."""
    return [
        1.0 if float((np.asarray(frame).mean(axis=2) > 100).mean()) > 0.03 else 0.0
        for frame in frames
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=30, help="per planted-shot length")
    parser.add_argument("--shot-ms", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument(
        "--planted", nargs="+", choices=["cut", "overlay"], default=["cut", "overlay"]
    )
    args = parser.parse_args(argv)
    rng = random.Random(7)
    videos = {
        f"{planted} {shot_ms} ms": [
            encode(frames_of(rng, shot_ms, planted == "overlay")[0], FPS, "libx264")
            for _ in range(args.videos)
        ]
        for planted in args.planted
        for shot_ms in args.shot_ms
    }
    report: dict[str, dict[str, Any]] = {}
    for name, sampling in SAMPLINGS.items():
        recall: dict[str, float] = {}
        scored_frames = cpu = 0.0
        for shot_ms, encoded in videos.items():
            found = 0
            for data in encoded:
                scored: list[tuple[int, int]] = []
                started = time.process_time()
                [best] = segment_scores(
                    data, "video/mp4", 1, planted_scorer, sampling=sampling, scored=scored
                )
                cpu += time.process_time() - started
                found += best >= 0.5
                scored_frames += len(scored)
            recall[shot_ms] = round(found / len(encoded), 3)
        count = len(videos) * args.videos
        report[name] = {
            "recall": recall,
            "frames_scored": round(scored_frames / (count * FPS * SECONDS), 4),
            "cpu_ms_per_video": round(1000 * cpu / count, 1),
        }
        print(
            f"{name:<22} recall {recall}  frames scored {report[name]['frames_scored']:.1%}  "
            f"decode+choose {report[name]['cpu_ms_per_video']} ms CPU per video",
            flush=True,
        )
    print(json.dumps({"videos": args.videos, "seconds": SECONDS, "fps": FPS, "by": report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
