"""speech_text: speech in audio and in the audio tracks of video, transcribed offline by
PocketSphinx and scored by the text detector.

PocketSphinx (`pocketsphinx`, pinned in pyproject.toml) ships its US English acoustic model,
dictionary and language model in the wheel; nothing is fetched at run time. PyAV (its own
FFmpeg) decodes every audio stream of the file to 16 kHz mono 16-bit PCM, with the demuxer the
declared MIME type names (never a probe, as for video). A request's segment is an equal share
of each stream's time (segments of a video are equal runs of frames: the same stretch of time);
PocketSphinx's voice activity detector cuts it into utterances, each decoded alone. Each
utterance's text goes to `offensive_text` (one call for the batch,
modstream/detectors/text_in_media.py); the findings carry its time range `start_ms`/`end_ms` in the
file and the decoder's confidence (the utterance's posterior probability per word, a geometric
mean).

Cost bound: at most `max_audio_seconds` of audio per file, all streams together; a longer file
is refused (never transcribed in part). A video without sound has no speech: `offensive` 0.
Decoders are not thread-safe: each model worker thread builds its own.
"""

from __future__ import annotations

import functools
import hashlib
import io
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import av
import numpy as np

from modstream.core.limits import Limits
from modstream.detectors import language, video
from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.detectors.text_in_media import Reading, ScoreTexts, evidence_of

ADAPTER_VERSION = "a1"  # P(offensive) of the transcript, as offensive_text scores it
RATE = 16_000  # samples per second: what the shipped acoustic model was trained on
FRAMES_PER_SECOND = 100  # PocketSphinx's feature frames
# Declared MIME type -> FFmpeg demuxer, for audio files (video: modstream/detectors/video.py's
# VIDEO_FORMATS).
AUDIO_FORMATS = {
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mp4": "mp4",
    "audio/webm": "webm",
    "audio/flac": "flac",
}
SegmentReadings = list[list[Reading]]  # per segment: its utterances over every stream


class SpeechText:
    name: str = "speech_text"
    modalities: tuple[str, ...] = ("audio", "video")
    labels: tuple[str, ...] = ("offensive",)

    def __init__(
        self, score_texts: ScoreTexts, text_model_version: str, *, limits: Limits | None = None
    ) -> None:  # fmt: skip
        self.limits = limits or Limits()
        self.score_texts = score_texts
        self.languages = language.identifier()  # names the language of what was read
        version = metadata.version("pocketsphinx")
        self.model_version = f"pocketsphinx-{version}-en-us+{text_model_version}-{ADAPTER_VERSION}"
        self.files: video.OncePerVideo[SegmentReadings] = video.OncePerVideo()
        self._local = threading.local()
        self._decoder()  # the model loads now, not on the first request

    def detect(self, items: Sequence[Item]) -> list[Evidence | MediaError]:
        readings: list[list[Reading] | MediaError] = []
        for item in items:
            data, mime_type, segments = item.data or b"", item.mime_type, item.segments
            key = (hashlib.sha256(data).digest(), mime_type, segments)
            per_segment = self.files.get(
                key, functools.partial(self.transcribe, data, mime_type, segments)
            )
            segment = item.segment or 0
            if isinstance(per_segment, MediaError):
                readings.append(per_segment)
            elif segment >= len(per_segment):
                readings.append(MediaError(f"segment {segment} of {len(per_segment)}"))
            else:
                readings.append(per_segment[segment])
        return evidence_of(readings, self.score_texts, self.languages.identify)

    def transcribe(self, data: bytes, mime_type: str | None, segments: int) -> SegmentReadings:
        """Every segment's utterances, over every audio stream, the file decoded once."""
        per_segment: SegmentReadings = [[] for _ in range(segments)]
        for stream, pcm in decode_pcm(data, mime_type, self.limits).items():
            size = max(1, -(-len(pcm) // segments))
            for segment in range(segments):
                start = segment * size
                for reading in self._utterances(pcm[start : start + size], start, stream):
                    per_segment[segment].append(reading)
        return per_segment

    def _utterances(self, pcm: np.ndarray, offset: int, stream: int) -> list[Reading]:
        from pocketsphinx import Segmenter

        decoder = self._decoder()
        readings = []
        for speech in Segmenter(sample_rate=RATE).segment(io.BytesIO(pcm.tobytes())):
            decoder.start_utt()
            decoder.process_raw(speech.pcm, full_utt=True)
            decoder.end_utt()
            hypothesis = decoder.hyp()
            text = hypothesis.hypstr.strip() if hypothesis is not None else ""
            if not text:
                continue
            words = max(1, len(text.split()))
            start_ms = round(offset * 1000 / RATE + speech.start_time * 1000)
            end_ms = round(offset * 1000 / RATE + speech.end_time * 1000)
            readings.append(
                Reading(
                    text,
                    float(min(1.0, max(0.0, hypothesis.prob)) ** (1 / words)),
                    group=stream,
                    where={"start_ms": start_ms, "end_ms": end_ms},
                )
            )
        return readings

    def _decoder(self) -> Any:
        """This thread's decoder (the shipped en-us model), built on its first use."""
        decoder = getattr(self._local, "decoder", None)
        if decoder is None:
            from pocketsphinx import Decoder

            decoder = Decoder(samprate=RATE, loglevel="FATAL")
            self._local.decoder = decoder
        return decoder


def decode_pcm(data: bytes, mime_type: str | None, limits: Limits) -> dict[int, np.ndarray]:
    """Each audio stream (by index) as 16 kHz mono int16; {} for a video without sound; a
    MediaError for audio without a stream, a file over `max_audio_seconds`, or one that does not
    decode."""
    fmt = AUDIO_FORMATS.get(mime_type or "") or video.VIDEO_FORMATS.get(mime_type or "")
    if fmt is None:
        raise MediaError(f"audio: no decoder for the declared type {str(mime_type)[:64]!r}")
    bound = limits.max_audio_seconds * RATE
    try:
        container: Any
        with av.open(io.BytesIO(data), format=fmt) as container:
            streams = list(container.streams.audio)
            if not streams:
                if mime_type in AUDIO_FORMATS:
                    raise MediaError("audio: no audio stream")
                return {}
            chunks: dict[int, list[np.ndarray]] = {stream.index: [] for stream in streams}
            resamplers = {
                stream.index: av.AudioResampler(format="s16", layout="mono", rate=RATE)
                for stream in streams
            }
            total = 0
            for packet in container.demux(*streams):
                index = packet.stream.index
                # The flush packet (size 0) ends a stream: the decoder's last frames, then
                # None flushes the resampler.
                frames = [*packet.decode(), *([] if packet.size else [None])]
                for frame in frames:
                    for out in resamplers[index].resample(frame):
                        samples = out.to_ndarray().reshape(-1)
                        total += len(samples)
                        if total > bound:
                            raise MediaError(
                                f"audio: more than {limits.max_audio_seconds} s in all"
                            )
                        chunks[index].append(samples)
    except MediaError:
        raise
    except Exception as error:  # FFmpeg and PyAV raise many kinds on hostile input
        raise MediaError(f"audio does not decode ({type(error).__name__})") from None
    return {
        index: np.concatenate(parts).astype(np.int16) if parts else np.zeros(0, np.int16)
        for index, parts in chunks.items()
    }
