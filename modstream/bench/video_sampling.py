"""Video frame sampling: recall of one planted flagged frame against the sampling rate.

    python -m modstream.bench.video_sampling --videos 40 --frames 50

Each generated video (PyAV, mpeg4, 10 fps) has quiet frames and one planted frame at a random
position (tests/udfs/frames.py: after encoding open_nsfw scores it about 0.1, the others
0.015 or less; flag threshold 0.05). The
whole video is one segment; every `s`-th frame is decoded-and-scored; a video counts as found
when its segment score reaches the flag threshold. Prints recall and model time per video for
each sampling rate.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from modstream.detectors.nsfw_image import NsfwImage
from modstream.detectors.video import encode, segment_scores
from modstream.testing.media import background, flagged

RATES = (1, 2, 3, 5, 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=40)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--threshold", type=float, default=0.05)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    detector = NsfwImage()
    videos = []
    for index in range(args.videos):
        images = [background(index * 1000 + f) for f in range(args.frames)]
        images[rng.randrange(args.frames)] = flagged()
        videos.append(encode(images))
    report = {}
    for rate in RATES:
        started = time.perf_counter()
        found = sum(
            1
            for video in videos
            if segment_scores(video, "video/mp4", 1, detector.score_frames, sample_every=rate)[0]
            >= args.threshold
        )
        elapsed = time.perf_counter() - started
        report[rate] = {
            "recall": round(found / len(videos), 3),
            "ms_per_video": round(1000 * elapsed / len(videos), 1),
        }
    print(json.dumps({"videos": args.videos, "frames": args.frames, "by_sample_every": report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
