"""speech_text on real speech made here with espeak-ng (`make setup` installs it): PocketSphinx
transcribes it, offensive_text scores the transcript, findings say when and how sure.

espeak-ng's formant voices are hard for PocketSphinx's model of human speech: the sentences
and the voice below are ones it transcribes with the offending word intact (most short insults
in the default voice come out as other words). The assertions are on the words it heard."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from modstream.core.limits import Limits
from modstream.detectors.detector import Evidence, Item, MediaError
from modstream.detectors.registry import detector
from modstream.detectors.speech_text import RATE, SpeechText
from modstream.testing.media import SPOKEN_OFFENSIVE as OFFENSIVE
from modstream.testing.media import speak

CLEAN = "the weather is lovely today and we walked in the park"


def with_picture(wav: bytes) -> bytes:
    """An MP4 of grey frames with `wav` as its AAC sound track."""
    buffer = io.BytesIO()
    container: av.container.OutputContainer
    with av.open(io.BytesIO(wav)) as source, av.open(buffer, "w", format="mp4") as container:
        picture = container.add_stream("mpeg4", rate=10)
        picture.width, picture.height, picture.pix_fmt = 64, 64, "yuv420p"
        sound = container.add_stream("aac", rate=RATE)
        resampler = av.AudioResampler(format="fltp", layout="mono", rate=RATE)
        seconds = 0.0
        for frame in source.decode(audio=0):
            seconds += frame.samples / frame.sample_rate
            for chunk in resampler.resample(frame):
                container.mux(sound.encode(chunk))
        container.mux(sound.encode(None))
        grey = Image.new("RGB", (64, 64), "grey")
        for _ in range(int(seconds * 10)):
            container.mux(picture.encode(av.VideoFrame.from_image(grey)))
        container.mux(picture.encode(None))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def speech() -> SpeechText:
    built = detector("speech_text", intra_op_threads=1)
    assert isinstance(built, SpeechText)
    return built


def evidence(result: Evidence | MediaError) -> Evidence:
    assert isinstance(result, Evidence), result
    return result


def test_spoken_offence_is_transcribed_and_scored(speech: SpeechText, tmp_path: Path) -> None:
    wav = speak(OFFENSIVE, tmp_path)
    [segment] = speech.transcribe(wav, "audio/wav", 1)
    heard = " ".join(reading.text for reading in segment).split()
    assert "bastard" in heard, heard
    [result] = speech.detect([Item(data=wav, mime_type="audio/wav")])
    found = evidence(result)
    assert found.scores["offensive"] >= 0.85  # global.yaml's offensive-in-media-limit
    finding = found.findings[0]
    seconds = len(wav) / 2 / 22_050  # espeak-ng speaks at 22,050 Hz
    assert 0 <= finding["start_ms"] < finding["end_ms"] <= seconds * 1000 + 100
    assert 0 < finding["confidence"] <= 1


def test_clean_speech_scores_low(speech: SpeechText, tmp_path: Path) -> None:
    [result] = speech.detect([Item(data=speak(CLEAN, tmp_path), mime_type="audio/wav")])
    clean = evidence(result)
    assert clean.scores["offensive"] < 0.5 and clean.findings
    assert clean.language is not None and clean.language.code == "en"  # of the transcript


def test_segments_are_stretches_of_time(speech: SpeechText, tmp_path: Path) -> None:
    """Four seconds of silence, then the offence: segment 1 of 2 has it, segment 0 nothing."""
    wav = speak(OFFENSIVE, tmp_path, silence_s=4.0)
    first, second = (
        evidence(r)
        for r in speech.detect(
            [Item(data=wav, mime_type="audio/wav", segment=s, segments=2) for s in range(2)]
        )
    )
    assert first.scores == {"offensive": 0.0} and first.findings == ()
    # What the recogniser hears depends on where the segment cuts: the word, not the score.
    heard = " ".join(reading.text for reading in speech.transcribe(wav, "audio/wav", 2)[1])
    assert "bastard" in heard.split() and second.scores["offensive"] > 0.5, heard
    assert second.findings[0]["start_ms"] >= 3_500  # times in the file, not in the segment


def test_the_sound_track_of_a_video_is_heard(speech: SpeechText, tmp_path: Path) -> None:
    mp4 = with_picture(speak(OFFENSIVE, tmp_path))
    [result] = speech.detect([Item(data=mp4, mime_type="video/mp4")])
    assert evidence(result).scores["offensive"] >= 0.85
    silent = io.BytesIO()
    with av.open(silent, "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for _ in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((64, 64, 3), np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    [quiet] = speech.detect([Item(data=silent.getvalue(), mime_type="video/mp4")])
    assert evidence(quiet).scores == {"offensive": 0.0}  # no sound track, no speech


def test_bad_and_oversized_audio_are_errors_of_their_item(
    speech: SpeechText, tmp_path: Path
) -> None:
    wav = speak(CLEAN, tmp_path)
    garbage, unknown_type, fine = speech.detect(
        [
            Item(data=b"RIFF\x00\x00garbage", mime_type="audio/wav"),
            Item(data=wav, mime_type="audio/x-unheard-of"),
            Item(data=wav, mime_type="audio/wav"),
        ]
    )
    assert isinstance(garbage, MediaError) and isinstance(unknown_type, MediaError)
    assert isinstance(fine, Evidence)
    bounded = SpeechText(speech.score_texts, "text-1", limits=Limits(max_audio_seconds=1))
    [too_long] = bounded.detect([Item(data=wav, mime_type="audio/wav")])
    assert isinstance(too_long, MediaError) and "1 s" in str(too_long)
