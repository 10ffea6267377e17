"""Hostile media, read and decoded within bounds (docs/scanning.md, "Hostile media").

A `media_ref` comes from a user's upload: it may name a device, a FIFO, a directory, a symlink
out of the media folder or a file far larger than declared. `read_media` refuses all of these
with a `MediaError` (permanent: the request is answered `error`, never retried) before it reads
a byte, and reads at most the declared size + 1; only ordinary I/O failures (a file not there
yet, a storage error) are `OSError`, retried by the scan job. `image_frames` decodes every
frame of a still or animated image, each checked against the pixel limit from its header
before it is decoded.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlparse

from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors.detector import MediaError

# Formats Pillow may decode: what browsers show. Others (EPS runs Ghostscript, TIFF and the
# long tail of plugins) are refused, whatever the declared type says.
IMAGE_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP")  # JPEG covers MPO (phone photos)
# An OSError with one of these is the path's fault, not the storage's: no retry helps.
PERMANENT_ERRNOS = {
    errno.ELOOP,
    errno.EISDIR,
    errno.ENOTDIR,
    errno.ENAMETOOLONG,
    errno.ENXIO,
    errno.ENODEV,
    errno.EINVAL,
}
_OPEN_FLAGS = (
    os.O_RDONLY
    | os.O_NONBLOCK  # a FIFO or device put in place after the check must not block
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)
_CHUNK = 1 << 20
Image.init()  # register every plugin now: `Image.open(formats=...)` only preloads five
# Images between our limit and Pillow's error threshold are refused by `check_pixels`; Pillow's
# warning about them would only be noise in the job's log.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


def media_path(ref: str, root: Path) -> bytes:
    """The file a `file://` reference names, resolved (symlinks, `..`) and inside `root`; as
    bytes, so that any file name the reference can spell is handled exactly."""
    if "\x00" in ref:
        raise MediaError("media_ref: contains a NUL byte")
    try:
        parsed = urlparse(ref)
    except ValueError:
        raise MediaError("media_ref: not a URL") from None
    if parsed.scheme != "file":
        raise MediaError(f"media_ref: unsupported scheme {parsed.scheme[:16]!r}")
    if parsed.netloc not in ("", "localhost") or parsed.query or parsed.fragment:
        raise MediaError("media_ref: a file URL names a local path only")
    path = unquote_to_bytes(parsed.path)
    if b"\x00" in path:
        raise MediaError("media_ref: contains a NUL byte")
    if not path.startswith(b"/"):
        raise MediaError("media_ref: not an absolute path")
    real = os.path.realpath(path)
    if not _inside(real, os.path.realpath(os.fsencode(root))):
        raise MediaError("media_ref: outside the media root")
    return real


def read_media(
    ref: str, root: Path, limits: Limits, declared_bytes: int | None = None
) -> bytes:  # fmt: skip
    """The bytes of a regular file inside `root`, at most `declared_bytes` (and
    `max_media_bytes`). MediaError for anything hostile, OSError for ordinary I/O failures."""
    path = media_path(ref, root)
    limit = limits.max_media_bytes
    if declared_bytes is not None:
        if declared_bytes > limit:
            raise MediaError(f"media_ref: declared {declared_bytes} bytes, over the {limit} limit")
        limit = declared_bytes
    try:
        _regular(os.lstat(path).st_mode)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise _classify(error) from None
    try:
        info = os.fstat(fd)
        _regular(info.st_mode)  # what was opened, not what was checked before
        if not _inside(_opened_path(fd, path), os.path.realpath(os.fsencode(root))):
            raise MediaError("media_ref: outside the media root")
        if info.st_size > limit:
            raise MediaError(f"media_ref: {info.st_size} bytes, more than the {limit} allowed")
        data = _read_at_most(fd, limit + 1)
    except OSError as error:
        raise _classify(error) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise MediaError(f"media_ref: more than the {limit} bytes allowed")
    return data


def _inside(path: bytes, root: bytes) -> bool:
    return path == root or path.startswith(root.rstrip(b"/") + b"/")


def _regular(mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a regular file"
    )
    raise MediaError(f"media_ref: {kind}")


def _opened_path(fd: int, fallback: bytes) -> bytes:
    """Where the open descriptor really points (Linux): a directory swapped for a symlink
    between the check and the open is caught here."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}".encode())
    except OSError:
        return fallback


def _read_at_most(fd: int, count: int) -> bytes:
    parts: list[bytes] = []
    remaining = count
    while remaining > 0:
        part = os.read(fd, min(_CHUNK, remaining))
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _classify(error: OSError) -> Exception:
    if error.errno in PERMANENT_ERRNOS:
        return MediaError(f"media_ref: cannot be read ({errno.errorcode.get(error.errno, '?')})")
    return error


def check_pixels(width: int, height: int, limits: Limits) -> None:
    """Refuse a frame over the pixel limit from its declared size, before it is decoded."""
    if width <= 0 or height <= 0:
        raise MediaError(f"image: {width}x{height} pixels")
    if width * height > limits.max_image_pixels:
        raise MediaError(
            f"image: {width}x{height} pixels, over the {limits.max_image_pixels} limit"
        )


def pillow_limit(limits: Limits) -> None:
    """Pillow's own bomb check as a second line: it refuses twice MAX_IMAGE_PIXELS at open."""
    current = Image.MAX_IMAGE_PIXELS
    if current is None or current > limits.max_image_pixels:
        Image.MAX_IMAGE_PIXELS = limits.max_image_pixels


def image_frames(data: bytes, limits: Limits) -> Iterator[Image.Image]:
    """Every frame of a still or animated image (GIF, APNG, WebP), as RGB, one at a time:
    each frame's size is checked before it is decoded; more than `max_frames` frames, or more
    than `max_decoded_pixels` in all, is a MediaError (a later frame is never left unscored)."""
    pillow_limit(limits)
    decoded = 0
    try:
        with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as image:
            index = 0
            while True:
                width, height = image.size
                check_pixels(width, height, limits)
                decoded += width * height
                if index >= limits.max_frames or decoded > limits.max_decoded_pixels:
                    raise MediaError(
                        f"image: more than {limits.max_frames} frames or "
                        f"{limits.max_decoded_pixels} pixels in all"
                    )
                image.load()
                yield image.convert("RGB")
                index += 1
                try:
                    image.seek(index)
                except EOFError:
                    return
    except MediaError:
        raise
    except Image.DecompressionBombError:
        raise MediaError(f"image: over the {limits.max_image_pixels} pixel limit") from None
    except Exception as error:  # Pillow raises many kinds on hostile input
        raise MediaError(f"image does not decode ({type(error).__name__})") from None
