"""Fuzzed hostile media through the scan job's batch path with the real detectors.

Every file is generated here from a seed or a Hypothesis strategy (nothing is downloaded) and
written under a media root; scan requests for `nsfw_image` and `media_check` go through
`modstream.scanning.batch.handle_safely`, exactly what a model worker runs. Whatever the file, every
request gets exactly one answer (`ok`, or `error` with one DLQ row `permanent`) and nothing is
raised. The number of cases tried per class is printed at the end (`pytest -s`), for
docs/scanning.md, "Fuzzed media".
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors.detector import Detector
from modstream.detectors.media import image_frames
from modstream.detectors.nsfw_image import NsfwImage
from modstream.detectors.registry import detector
from modstream.detectors.video import encode_streams
from modstream.jobs.scan.job import ScanConfig
from modstream.scanning.batch import handle_safely
from modstream.testing.media import background, bomb_png, flagged
from modstream.testing.records import T0
from modstream.testing.scans import request

LIMITS = Limits()
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
DETECTORS = ("nsfw_image", "media_check")
COUNTS: Counter[str] = Counter()


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same cases on every run: the counts in the docs are reproducible
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure prints its case
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


CONFIG_TOPICS = {"detector.results": "results", "moderation.dlq": "dlq"}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    print(f"\nmedia fuzz cases per class: {json.dumps(dict(sorted(COUNTS.items())))}")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    media = tmp_path_factory.mktemp("fuzz") / "media"
    (media / "uploads").mkdir(parents=True)
    (media.parent / "secret.png").write_bytes(_image("PNG", 7))
    os.mkfifo(media / "uploads" / "pipe.png")
    (media / "uploads" / "escape.png").symlink_to(media.parent / "secret.png")
    (media / "uploads" / "dev").symlink_to("/dev")
    return media


def scanners(name: str) -> Detector:
    return detector(name, intra_op_threads=1, limits=LIMITS)


class Scanned:
    """The answers to one file's requests: a result per (detector, segment), DLQ rows,
    retries."""

    def __init__(self, rows: Any, retries: list[Any]) -> None:
        self.results: dict[tuple[str, int | None], dict[str, Any]] = {}
        self.letters: list[dict[str, Any]] = []
        for topic, _key, value in rows:
            record = json.loads(value)
            if topic == "results":
                answer = (record["detector"], record["segment_id"])
                assert answer not in self.results, "answered twice"
                self.results[answer] = record
            else:
                assert topic == "dlq"
                self.letters.append(record)
        self.retries = retries

    def status(self, name: str, segment: int | None = None) -> str:
        return str(self.results[(name, segment)]["status"])

    def scores(self, name: str, segment: int | None = None) -> dict[str, float]:
        return dict(self.results[(name, segment)]["scores"])


def scan(
    root: Path,
    data: bytes | None,
    mime_type: str,
    *,
    kind: str,
    ref: str | None = None,
    segments: int = 1,
    declared: int | None = None,
    detectors: tuple[str, ...] = DETECTORS,
) -> Scanned:
    """Write `data` under the root (unless `ref` is given), send one request per detector and
    segment, check the invariant every case must hold, count the case under `kind`."""
    COUNTS[kind] += 1
    if ref is None:
        path = root / "uploads" / f"{kind}-{COUNTS[kind]}"
        path.write_bytes(data or b"")
        ref = path.as_uri()
    size = declared if declared is not None else len(data or b"")
    modality = mime_type.split("/")[0] if mime_type.split("/")[0] in ("image", "video") else "image"
    rows = []
    for name in detectors:
        for segment in range(segments):
            body = request(
                f"{kind}-{COUNTS[kind]}-{name}-{segment}", None, detector=name, modality=modality,
                mime_type=mime_type, media_ref=ref, size_bytes=size, segments=segments,
                segment_id=segment if segments > 1 else None,
            )  # fmt: skip
            rows.append((f"scan.requests.{modality}", body["content_id"], json.dumps(body)))
    config = ScanConfig(media_root=str(root), limits=LIMITS, topics=CONFIG_TOPICS)
    handled = handle_safely(config, rows, T0, scanners)  # must not raise, whatever the file
    out = Scanned(zip(handled.topics, handled.keys, handled.values, strict=True), handled.retries)
    assert len(out.results) + len(out.retries) == len(rows)  # each request once
    errors = [r for r in out.results.values() if r["status"] == "error"]
    assert len(out.letters) == len(errors)  # each error with its DLQ row
    assert {letter["error_class"] for letter in out.letters} <= {"permanent"}
    return out


def _image(fmt: str, seed: int, size: int = 64) -> bytes:
    buffer = io.BytesIO()
    background(seed, size).save(buffer, format=fmt)
    return buffer.getvalue()


def _animated(frames: list[Image.Image], fmt: str) -> bytes:
    buffer = io.BytesIO()
    frames[0].save(buffer, format=fmt, save_all=True, append_images=frames[1:], duration=80)
    return buffer.getvalue()


def _gif_bomb(width: int, height: int) -> bytes:
    """A GIF whose logical screen is `width` x `height` and whose one frame is 1x1."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    frame = b"," + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x4c\x01\x00"
    return b"GIF89a" + screen + frame + b";"


def _zlib_bomb_png(side: int) -> bytes:
    """A real bomb: `side` x `side` grey pixels of zeros, compressed about 1000:1."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\x00" * ((side + 1) * side), 9)
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


# -- decompression bombs ------------------------------------------------------------------


@st.composite
def bomb_sizes(draw: st.DrawFn, largest: int) -> tuple[int, int]:
    """A width and a height, each at most `largest`, whose product is over the pixel limit."""
    width = draw(st.integers(min_value=LIMITS.max_image_pixels // largest + 1, max_value=largest))
    height = draw(st.integers(min_value=LIMITS.max_image_pixels // width + 1, max_value=largest))
    return width, height


@given(
    fmt=st.sampled_from(["png", "gif"]),
    data=st.data(),
)
@fuzz(60)
def test_decompression_bombs_are_refused_from_their_header(
    root: Path, fmt: str, data: st.DataObject
) -> None:
    """PNG sides go up to 2^31-1, GIF sides to 65535: every size declared over the limit."""
    width, height = data.draw(bomb_sizes(2**31 - 1 if fmt == "png" else 65_535))
    assert width * height > LIMITS.max_image_pixels
    encoded = bomb_png(width, height) if fmt == "png" else _gif_bomb(width, height)
    out = scan(root, encoded, f"image/{fmt}", kind="decompression bomb")
    assert out.status("nsfw_image") == "error"
    assert out.scores("media_check")["corrupt"] == 1.0


@pytest.mark.parametrize("side", [6_400, 8_000])
def test_a_real_zlib_bomb_is_refused_before_it_is_inflated(root: Path, side: int) -> None:
    data = _zlib_bomb_png(side)
    assert len(data) < 200_000 < side * side
    out = scan(root, data, "image/png", kind="decompression bomb")
    assert out.status("nsfw_image") == "error"
    assert out.scores("media_check")["corrupt"] == 1.0


# -- animated images: only a later frame is flagged ---------------------------------------


@given(
    fmt=st.sampled_from(["GIF", "PNG", "WEBP"]),
    count=st.integers(min_value=2, max_value=5),
    data=st.data(),
)
@fuzz(24)
def test_an_animated_image_scores_its_flagged_later_frame(
    root: Path, fmt: str, count: int, data: st.DataObject
) -> None:
    position = data.draw(st.integers(min_value=1, max_value=count - 1))
    seed = data.draw(st.integers(min_value=0, max_value=10_000))
    frames = [background(seed + i, 128) for i in range(count)]
    frames[position] = flagged(128)
    encoded = _animated(frames, fmt)
    mime = {"GIF": "image/gif", "PNG": "image/png", "WEBP": "image/webp"}[fmt]
    out = scan(root, encoded, mime, kind="animated", detectors=("nsfw_image",))
    nsfw = out.scores("nsfw_image")["nsfw"]
    model = scanners("nsfw_image")
    assert isinstance(model, NsfwImage)
    each = model.score_frames(list(image_frames(encoded, LIMITS)))
    assert len(each) == count and abs(nsfw - max(each)) < 1e-6
    assert each.index(max(each)) == position and nsfw > 0.05 > each[0]


# -- multi-stream video -------------------------------------------------------------------


@given(
    streams=st.integers(min_value=2, max_value=3),
    frames=st.integers(min_value=4, max_value=8),
    segments=st.integers(min_value=2, max_value=3),
    data=st.data(),
)
@fuzz(12)
def test_every_stream_of_a_video_is_scored(
    root: Path, streams: int, frames: int, segments: int, data: st.DataObject
) -> None:
    carrier = data.draw(st.integers(min_value=1, max_value=streams - 1))  # never the first
    position = data.draw(st.integers(min_value=0, max_value=frames - 1))
    seed = data.draw(st.integers(min_value=0, max_value=10_000))
    videos = [[background(seed + s * 100 + i) for i in range(frames)] for s in range(streams)]
    videos[carrier][position] = flagged()
    encoded = encode_streams(videos)
    out = scan(root, encoded, "video/mp4", kind="multi-stream video", segments=segments,
               detectors=("nsfw_image",))  # fmt: skip
    by_segment = {segment: r["scores"]["nsfw"] for (_, segment), r in out.results.items()}
    size = -(-frames // segments)
    flagged_segment = min(segments - 1, position // size)
    assert len(by_segment) == segments and not out.letters
    assert max(by_segment, key=lambda s: by_segment[s]) == flagged_segment
    assert by_segment[flagged_segment] > 0.05


# -- polyglots and declared types that lie ------------------------------------------------


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.html", "<b>hello</b>")
    return buffer.getvalue()


PAYLOADS = {
    "zip": _zip(),
    "html": b"<html><body><script>alert(document.cookie)</script></body></html>",
    "eicar": EICAR,
    "php": b"<?php system($_GET['c']); ?>",
}


def _embed(base: bytes, fmt: str, payload: bytes, placement: str) -> bytes:
    if placement == "appended":
        return base + payload
    if fmt == "JPEG":  # a COM segment right after SOI: still a valid JPEG
        return base[:2] + b"\xff\xfe" + struct.pack(">H", len(payload) + 2) + payload + base[2:]
    if fmt == "PNG":  # a tEXt chunk after IHDR: still a valid PNG
        body = b"Comment\x00" + payload
        crc = zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF
        text = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", crc)
        return base[:33] + text + base[33:]
    return base + payload  # GIF: after the trailer


@given(
    fmt=st.sampled_from(["JPEG", "PNG", "GIF"]),
    payload=st.sampled_from(sorted(PAYLOADS)),
    placement=st.sampled_from(["appended", "inside"]),
    declared=st.sampled_from(["image/jpeg", "image/png", "image/gif", "image/webp", "video/mp4"]),
    seed=st.integers(min_value=0, max_value=1_000),
)
@fuzz(60)
def test_polyglots_are_flagged_as_malware_and_lies_about_the_type_as_a_mismatch(
    root: Path, fmt: str, payload: str, placement: str, declared: str, seed: int
) -> None:
    data = _embed(_image(fmt, seed), fmt, PAYLOADS[payload], placement)
    out = scan(root, data, declared, kind="polyglot")
    check = out.scores("media_check")
    assert check["malware"] == 1.0
    actual = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif"}[fmt]
    assert check["mime_mismatch"] == (0.0 if declared == actual else 1.0)
    assert out.status("nsfw_image") in ("ok", "error")


MAGIC = [b"", b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"\x00\x00\x00\x18ftypmp42"]


@given(
    data=st.binary(min_size=1, max_size=4_096),
    declared=st.sampled_from(["image/jpeg", "image/png", "image/gif", "video/mp4", "video/webm"]),
    magic=st.sampled_from(MAGIC),
)
@fuzz(60)
def test_random_bytes_behind_any_magic_number(
    root: Path, data: bytes, declared: str, magic: bytes
) -> None:
    out = scan(root, magic + data, declared, kind="random bytes, any magic")
    assert out.status("media_check") == "ok"
    assert out.status("nsfw_image") in ("ok", "error")


# -- truncated and empty files ------------------------------------------------------------


def _truncatable() -> dict[str, tuple[bytes, str]]:
    gif = _animated([background(i, 64) for i in range(3)], "GIF")
    video = encode_streams([[background(i, 64) for i in range(6)]])
    return {
        "jpeg": (_image("JPEG", 3, 128), "image/jpeg"),
        "png": (_image("PNG", 4, 128), "image/png"),
        "webp": (_image("WEBP", 5, 128), "image/webp"),
        "animated gif": (gif, "image/gif"),
        "mp4": (video, "video/mp4"),
    }


TRUNCATABLE = _truncatable()


@given(
    name=st.sampled_from(sorted(TRUNCATABLE)),
    fraction=st.floats(min_value=0.0, max_value=0.999),
)
@fuzz(60)
def test_truncated_images_and_videos(root: Path, name: str, fraction: float) -> None:
    whole, mime = TRUNCATABLE[name]
    cut = whole[: int(len(whole) * fraction)]
    out = scan(root, cut, mime, kind="truncated")
    assert out.status("nsfw_image") in ("ok", "error")
    if len(cut) < 16:
        assert out.status("nsfw_image") == "error"


@pytest.mark.parametrize(
    "mime",
    [
        "image/jpeg", "image/png", "image/gif", "image/webp", "video/mp4", "video/webm",
        "video/quicktime", "audio/mpeg", "application/octet-stream",
    ],
)  # fmt: skip
def test_zero_byte_files(root: Path, mime: str) -> None:
    out = scan(root, b"", mime, kind="zero-byte")
    assert out.status("nsfw_image") == "error"
    assert out.scores("media_check")["corrupt"] == 1.0


# -- hostile references -------------------------------------------------------------------


def _hostile_refs(root: Path) -> st.SearchStrategy[str]:
    base = root.as_uri()
    inside = st.sampled_from(["uploads/a.png", "uploads/x/y.png", "a.png"])
    return st.one_of(
        inside.map(lambda p: f"{base}/{p}".replace(".png", "\x00.png")),
        inside.map(lambda p: f"{base}/{p}%00.png"),
        st.sampled_from(
            [
                "file:///dev/zero",
                "file:///dev/urandom",
                "file:///dev/null",
                "file:///etc/passwd",
                "file:///proc/self/mem",
                "file:///proc/self/environ",
                f"{base}/uploads/pipe.png",
                f"{base}/uploads",
                f"{base}/uploads/",
                f"{base}/uploads/escape.png",
                f"{base}/uploads/dev/zero",
                f"{base}/uploads/dev/urandom",
                f"{base}/../secret.png",
            ]
        ),
        # Two or more levels up from uploads/ leave the root (one stays inside it).
        st.integers(min_value=2, max_value=6).map(
            lambda n: f"{base}/uploads/" + "../" * n + "secret.png"
        ),
        st.integers(min_value=2, max_value=6).map(
            lambda n: f"{base}/uploads/" + "%2e%2e/" * n + "secret.png"
        ),
        st.sampled_from(
            ["http", "https", "s3", "gs", "ftp", "data", "javascript", "smb", "FILE1"]
        ).map(lambda scheme: f"{scheme}://host/uploads/a.png"),
        st.sampled_from(["evil.example", "127.0.0.1", "user@host", "[::1]"]).map(
            lambda host: f"file://{host}{root}/uploads/a.png"
        ),
        st.text(min_size=1, max_size=40).map(lambda text: f"{base}/{text}\x00"),
    )


@given(data=st.data())
@fuzz(120)
def test_hostile_references_fail_permanently_for_the_request_only(
    root: Path, data: st.DataObject
) -> None:
    ref = data.draw(_hostile_refs(root))
    out = scan(root, None, "image/png", kind="hostile reference", ref=ref)
    assert not out.retries, ref
    assert {out.status(name) for name in DETECTORS} == {"error"}, ref
    assert len(out.letters) == len(DETECTORS)


@given(
    declared=st.integers(min_value=0, max_value=1_000),
    extra=st.integers(min_value=1, max_value=5_000),
)
@fuzz(30)
def test_files_larger_than_declared_fail_permanently(root: Path, declared: int, extra: int) -> None:
    data = os.urandom(declared + extra)
    out = scan(root, data, "image/png", kind="more bytes than declared", declared=declared)
    assert {out.status(name) for name in DETECTORS} == {"error"}
    assert all("allowed" in letter["message"] for letter in out.letters)


@given(
    name=st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=30
    )
)
@fuzz(40)
def test_look_alike_names_inside_the_root_are_never_read_from_elsewhere(
    root: Path, name: str
) -> None:
    """Unicode look-alikes of `..` and `/` (U+FF0E, U+2215, U+2024 …) are ordinary names:
    inside the root and missing, they are retried (the file may still arrive); never `ok`."""
    lookalike = name + "\uff0e\uff0e\u2215secret.png"
    ref = (root / "uploads" / lookalike).as_uri()
    out = scan(root, None, "image/png", kind="look-alike reference", ref=ref)
    assert len(out.retries) + len(out.letters) == len(DETECTORS)
    assert all(r["status"] != "ok" for r in out.results.values())
