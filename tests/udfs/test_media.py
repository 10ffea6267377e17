"""Hostile media references and images: refused permanently (MediaError) before a byte is
read, never blocking, never reading more than declared; frames of animated images."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors.detector import MediaError
from modstream.detectors.media import image_frames, media_path, read_media
from modstream.testing.media import bomb_png, encode, noise, solid

LIMITS = Limits()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    media = tmp_path / "media"
    (media / "uploads").mkdir(parents=True)
    (media / "uploads" / "ok.png").write_bytes(b"0123456789")
    (tmp_path / "secret.txt").write_bytes(b"outside")
    return media


def uri(path: Path | str) -> str:
    return Path(path).as_uri()


def test_a_file_inside_the_root_is_read(root: Path) -> None:
    ref = uri(root / "uploads" / "ok.png")
    assert read_media(ref, root, LIMITS, 10) == b"0123456789"
    assert read_media(ref, root, LIMITS) == b"0123456789"
    assert read_media(ref.replace("file://", "file://localhost"), root, LIMITS) == b"0123456789"
    inside = root / "uploads" / "link.png"
    inside.symlink_to(root / "uploads" / "ok.png")  # a symlink that stays inside is fine
    assert read_media(uri(inside), root, LIMITS) == b"0123456789"


@pytest.mark.parametrize(
    "ref, why",
    [
        ("file:///media/a\x00.png", "NUL"),
        ("file:///media/a%00.png", "NUL"),
        ("s3://bucket/key", "scheme"),
        ("http://127.0.0.1/x.png", "scheme"),
        ("data:image/png;base64,AAAA", "scheme"),
        ("/etc/passwd", "scheme"),
        ("file://evil.example/etc/passwd", "local path"),
        ("file:relative/a.png", "absolute"),
        ("file:///etc/passwd", "outside"),
        ("file:///dev/zero", "outside"),
        ("file://[::1/x", "URL"),
    ],
)
def test_references_that_are_not_local_files_inside_the_root(
    root: Path, ref: str, why: str
) -> None:
    with pytest.raises(MediaError, match=why):
        read_media(ref, root, LIMITS)


def test_dot_dot_and_symlinks_cannot_escape_the_root(root: Path) -> None:
    for ref in (
        uri(root) + "/uploads/../../secret.txt",
        uri(root) + "/uploads/%2e%2e/%2E%2E/secret.txt",
    ):
        with pytest.raises(MediaError, match="outside"):
            read_media(ref, root, LIMITS)
    (root / "uploads" / "escape.png").symlink_to(root.parent / "secret.txt")
    (root / "uploads" / "dev").symlink_to("/dev")
    for name in ("escape.png", "dev/zero", "dev/urandom"):
        with pytest.raises(MediaError, match="outside"):
            read_media(uri(root / "uploads" / name), root, LIMITS)


def test_devices_directories_and_fifos_are_refused_without_blocking(root: Path) -> None:
    everywhere = Path("/")
    for device in ("/dev/zero", "/dev/urandom", "/dev/null"):
        with pytest.raises(MediaError, match="device"):
            read_media(uri(device), everywhere, LIMITS)
    with pytest.raises(MediaError, match="directory"):
        read_media(uri(root / "uploads"), root, LIMITS)
    fifo = root / "uploads" / "pipe.png"
    os.mkfifo(fifo)  # nobody writes to it: a blocking open or read would hang forever
    errors: list[BaseException] = []
    reader = threading.Thread(target=lambda: _capture(errors, uri(fifo), root))
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert len(errors) == 1 and isinstance(errors[0], MediaError) and "FIFO" in str(errors[0])


def test_a_fifo_swapped_in_after_the_check_neither_blocks_nor_is_read(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lstat says regular file, the open finds a FIFO: O_NONBLOCK and fstat catch it."""
    fifo = root / "uploads" / "swapped.png"
    os.mkfifo(fifo)
    regular = os.lstat(root / "uploads" / "ok.png")
    monkeypatch.setattr(os, "lstat", lambda _path: regular)
    errors: list[BaseException] = []
    reader = threading.Thread(target=lambda: _capture(errors, uri(fifo), root))
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "opening a FIFO blocked"
    assert len(errors) == 1 and "FIFO" in str(errors[0])


def _capture(errors: list[BaseException], ref: str, root: Path) -> None:
    try:
        read_media(ref, root, LIMITS)
    except BaseException as error:  # the test inspects it
        errors.append(error)


def test_more_bytes_than_declared_or_allowed_are_refused(root: Path) -> None:
    ref = uri(root / "uploads" / "ok.png")  # 10 bytes
    with pytest.raises(MediaError, match="more than the 9"):
        read_media(ref, root, LIMITS, 9)
    with pytest.raises(MediaError, match="more than the 5"):
        read_media(ref, root, Limits(max_media_bytes=5))
    with pytest.raises(MediaError, match="declared"):
        read_media(ref, root, Limits(max_media_bytes=5), 6)


def test_a_file_whose_size_lies_is_read_only_to_the_declared_size_plus_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/proc files report size 0 and have content: the read itself must stop."""
    reads: list[int] = []
    real = os.read

    def counting(fd: int, count: int) -> bytes:
        data = real(fd, count)
        reads.append(len(data))
        return data

    assert os.stat("/proc/self/status").st_size == 0
    monkeypatch.setattr(os, "read", counting)
    with pytest.raises(MediaError, match="more than the 10"):
        read_media("file:///proc/self/status", Path("/proc"), LIMITS, 10)
    assert sum(reads) == 11


def test_a_missing_file_inside_the_root_is_transient(root: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_media(uri(root / "uploads" / "later.png"), root, LIMITS)


def test_media_path_resolves_inside_the_root(root: Path) -> None:
    real = media_path(uri(root) + "/uploads/./x/../ok.png", root)
    assert real == os.fsencode(root / "uploads" / "ok.png")
    assert stat.S_ISREG(os.stat(real).st_mode)


def test_a_decompression_bomb_is_refused_from_its_header() -> None:
    with pytest.raises(MediaError, match="over the"):
        next(image_frames(bomb_png(100_000, 100_000), LIMITS))
    with pytest.raises(MediaError, match="over the"):
        next(image_frames(bomb_png(5_000, 5_000), Limits(max_image_pixels=1_000_000)))
    assert Image.MAX_IMAGE_PIXELS is not None and LIMITS.max_image_pixels >= Image.MAX_IMAGE_PIXELS


def animated(frames: list[Image.Image], fmt: str) -> bytes:
    buffer = io.BytesIO()
    extra: dict[str, Any] = {"save_all": True, "append_images": frames[1:], "duration": 100}
    if fmt == "GIF":
        extra["disposal"] = 1
    frames[0].save(buffer, format=fmt, **extra)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["GIF", "PNG", "WEBP"])
def test_every_frame_of_an_animated_image_is_decoded(fmt: str) -> None:
    colours = [(200, 0, 0), (0, 200, 0), (0, 0, 200)]
    frames = list(image_frames(animated([solid(c, 32) for c in colours], fmt), LIMITS))
    assert len(frames) == 3 and all(f.mode == "RGB" and f.size == (32, 32) for f in frames)
    centre = [f.getpixel((16, 16)) for f in frames]
    for got, want in zip(centre, colours, strict=True):
        assert isinstance(got, tuple)
        assert all(abs(a - b) <= 8 for a, b in zip(got, want, strict=True))


def test_frame_and_pixel_bounds_refuse_rather_than_skip_later_frames() -> None:
    data = animated([solid((i * 40, 0, 0), 32) for i in range(5)], "GIF")
    with pytest.raises(MediaError, match="frames"):
        list(image_frames(data, Limits(max_frames=4)))
    with pytest.raises(MediaError, match="pixels"):
        list(image_frames(data, Limits(max_decoded_pixels=32 * 32 * 4)))
    assert len(list(image_frames(data, Limits(max_frames=5)))) == 5


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x89PNG\r\n\x1a\n",
        encode(noise(3, 64))[:100],
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n",
        encode(noise(4, 16), "TIFF"),
    ],
    ids=["empty", "magic-only", "truncated", "eps", "tiff"],
)
def test_what_does_not_decode_or_is_not_an_allowed_format_is_a_media_error(data: bytes) -> None:
    with pytest.raises(MediaError):
        list(image_frames(data, LIMITS))
