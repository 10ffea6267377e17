"""media_check: deterministic checks before any model, as evidence the policy can require.

Labels (0 or 1): `mime_mismatch` (the bytes' magic number is not the declared `mime_type`),
`corrupt` (the file does not parse as its declared kind, or its dimensions or frame count are
outside the limits of `modstream/core/limits.py`), `malware` (a yara rule of
`modstream/detectors/rules/malware.yar` matched: the EICAR test file, executables, script or markup
in images, archives hidden in media). A yara scan that does not finish in `yara_timeout_s` is an
error, not a clean result.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import yara
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors import media, video
from modstream.detectors.detector import Adapter, Item, MediaError, file_digest

RULES = Path(__file__).with_name("rules") / "malware.yar"
MAX_SIDE = 20_000  # a side longer than this is corrupt whatever the pixel count
MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "video/mp4": (b"ftyp",),  # at offset 4
    "video/quicktime": (b"ftyp", b"moov", b"mdat"),
    "video/webm": (b"\x1a\x45\xdf\xa3",),
    "audio/mpeg": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    "audio/ogg": (b"OggS",),
    "audio/wav": (b"RIFF",),
}
ADAPTER = Adapter(
    version="a1",
    labels=("mime_mismatch", "corrupt", "malware"),
    mapping=lambda raw: {"mime_mismatch": raw[0], "corrupt": raw[1], "malware": raw[2]},
)


def magic_matches(data: bytes, mime_type: str | None) -> bool:
    if mime_type is None or mime_type.startswith("text/"):
        return True
    signatures = MAGIC.get(mime_type)
    if signatures is None:
        return True  # a type we have no signature for is not called a mismatch
    if mime_type in ("video/mp4", "video/quicktime"):
        return any(data[4:8] == s for s in signatures)
    return any(data.startswith(s) for s in signatures)


def structurally_sound(data: bytes, mime_type: str | None, limits: Limits | None = None) -> bool:
    """The file parses as its declared kind within the bounds: an image's header (format
    allowlist, pixel limit before decoding) and `verify()`; a video's container, demuxed to
    the end without decoding (frame and pixel limits); text as UTF-8."""
    limits = limits or Limits()
    if mime_type and mime_type.startswith("image/"):
        media.pillow_limit(limits)
        try:
            with Image.open(io.BytesIO(data), formats=media.IMAGE_FORMATS) as image:
                width, height = image.size
                media.check_pixels(width, height, limits)
                if max(width, height) > MAX_SIDE:
                    return False
                image.verify()
            return True
        except Exception:
            return False
    if mime_type in video.VIDEO_FORMATS:
        try:
            video.frame_counts(data, mime_type, limits)
            return True
        except MediaError:
            return False
    if mime_type and mime_type.startswith("text/"):
        try:
            data.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False
    return len(data) > 0


class MediaCheck:
    name: str = "media_check"
    modalities: tuple[str, ...] = ("image", "video", "audio", "text")
    labels: tuple[str, ...] = ADAPTER.labels

    def __init__(self, limits: Limits | None = None) -> None:
        self.rules = yara.compile(filepath=str(RULES))
        self.model_version = f"media_check-{file_digest(RULES)[:12]}-{ADAPTER.version}"
        self.limits = limits or Limits()

    def detect(self, items: Sequence[Item]) -> list[dict[str, float] | MediaError]:
        results: list[dict[str, float] | MediaError] = []
        for item in items:
            data = item.data if item.data is not None else (item.text or "").encode("utf-8")
            try:
                malware = self._malware(data)
            except MediaError as error:
                results.append(error)
                continue
            results.append(
                ADAPTER(
                    [
                        0.0 if magic_matches(data, item.mime_type) else 1.0,
                        0.0 if structurally_sound(data, item.mime_type, self.limits) else 1.0,
                        1.0 if malware else 0.0,
                    ]
                )
            )
        return results

    def _malware(self, data: bytes) -> bool:
        """A yara match within `yara_timeout_s`; a scan that does not finish is not a clean
        result but an error (the policy reads it as unknown)."""
        try:
            return bool(self.rules.match(data=data, timeout=self.limits.yara_timeout_s))
        except yara.TimeoutError:
            raise MediaError(f"yara: no verdict in {self.limits.yara_timeout_s} s") from None
        except yara.Error as error:
            raise MediaError(f"yara: scan failed ({type(error).__name__})") from None
