"""`make models`: convert alt-profanity-check's scikit-learn model to ONNX (skl2onnx).

The package ships a TF-IDF vectorizer and a calibrated linear SVM (joblib). The converted graph
is `models/offensive_text.onnx`; at run time only onnxruntime reads it. The vectorizer is
converted with `locale: "C"`: the graph's StringNormalizer otherwise needs the `en_US.UTF-8`
locale to load, and with "C" lower-casing of non-ASCII letters differs slightly from
scikit-learn's (docs/BENCHMARKS.md). A test compares ONNX and scikit-learn scores within 1e-5
on an ASCII sample.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from modstream.core.config import PROJECT_ROOT

MODEL_PATH = PROJECT_ROOT / "models" / "offensive_text.onnx"


def load_sklearn() -> tuple[Any, Any]:
    import joblib

    data = resources.files("profanity_check") / "data"
    return joblib.load(str(data / "vectorizer.joblib")), joblib.load(str(data / "model.joblib"))


def convert(out: Path = MODEL_PATH) -> Path:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.pipeline import Pipeline

    vectorizer, model = load_sklearn()
    pipeline = Pipeline([("vectorizer", vectorizer), ("model", model)])
    onnx_model = convert_sklearn(
        pipeline,
        initial_types=[("text", StringTensorType([None, 1]))],
        options={
            id(vectorizer): {"locale": "C"},
            id(model): {"zipmap": False},
        },
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    onnx_model.doc_string = "alt-profanity-check TF-IDF + calibrated linear SVM (modstream)"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(onnx_model.SerializeToString())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)
    path = convert(args.out)
    print(f"models: wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
