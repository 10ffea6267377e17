"""offensive_text: alt-profanity-check's TF-IDF + calibrated linear SVM, converted to ONNX by
`make models` (modstream/detectors/text_model.py). Only onnxruntime runs it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from modstream.detectors import language, onnx_session
from modstream.detectors.detector import Adapter, Evidence, Item, MediaError, clip, file_digest
from modstream.detectors.text_model import MODEL_PATH

# The graph's `probabilities` output: [P(clean), P(offensive)] per text.
ADAPTER = Adapter(
    version="a1",
    labels=("offensive",),
    mapping=lambda raw: {"offensive": clip(raw[1])},
)


class OffensiveText:
    name: str = "offensive_text"
    modalities: tuple[str, ...] = ("text",)
    labels: tuple[str, ...] = ADAPTER.labels

    def __init__(self, path: Path = MODEL_PATH, *, intra_op_threads: int | None = None) -> None:
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `make models`")
        self.session = onnx_session.session(path, intra_op_threads=intra_op_threads)
        self.input_name = self.session.get_inputs()[0].name
        outputs = [output.name for output in self.session.get_outputs()]
        self.output = "probabilities" if "probabilities" in outputs else outputs[-1]
        # The language identifier names each text's language (modstream/detectors/language.py): its
        # version is part of this one, so the readers' model versions carry it too.
        self.languages = language.identifier()
        self.model_version = (
            f"profanity-{file_digest(path)[:12]}-{ADAPTER.version}+{self.languages.version}"
        )

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        batch = np.array(list(texts), dtype=object).reshape(-1, 1)
        return np.asarray(self.session.run([self.output], {self.input_name: batch})[0])

    def offensive(self, texts: Sequence[str]) -> list[float]:
        """P(offensive) of each text, one model call: how the readers of text in media
        (modstream/detectors/text_in_media.py) hand what they read to this detector."""
        return [ADAPTER([float(v) for v in row])["offensive"] for row in self.scores(texts)]

    def detect(self, items: Sequence[Item]) -> list[Evidence | MediaError]:
        """P(offensive) of each text in one model call, with the text's language."""
        texts: list[str] = []
        results: list[Evidence | MediaError] = []
        for item in items:
            if item.text is not None:
                texts.append(item.text)
                results.append(MediaError("pending"))
                continue
            try:
                texts.append((item.data or b"").decode("utf-8"))
                results.append(MediaError("pending"))
            except UnicodeDecodeError:
                results.append(MediaError("text is not UTF-8"))
        pending = [
            i for i, r in enumerate(results) if isinstance(r, MediaError) and str(r) == "pending"
        ]
        if pending:
            raw = self.scores(texts)
            for index, text, row in zip(pending, texts, raw, strict=True):
                scores = ADAPTER([float(v) for v in row])
                results[index] = Evidence(scores, language=self.languages.identify(text))
        return results
