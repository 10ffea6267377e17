"""deploy/k8s/Dockerfile: what the FlinkDeployments expect of the image is in it, and it builds
where Docker runs (skipped, saying why, where it does not: no CLI, or no daemon).

The build test needs what `make setup` makes (the jars, the text model) and a network: the
image downloads Python and the pinned wheels. It takes minutes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "k8s" / "Dockerfile"
FLINK_VERSION = version("apache-flink")
# Made by `make setup`, kept out of git, copied into the image.
BUILT = ("deploy/local/jars/flink", "models")
TAG = "modstream-k8s-test:latest"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_image_is_the_official_flink_image_of_the_pyflink_version() -> None:
    (base,) = [args for instruction, args in _instructions() if instruction == "FROM"]
    assert base.startswith(f"flink:{FLINK_VERSION}-"), base


def test_the_image_holds_what_the_deployments_name() -> None:
    """The project at /opt/modstream (the jobs' -py paths, MODSTREAM_HOME), /usr/bin/python3
    (-pyclientexec), flink-python in lib/ (FLINK-37727) and the S3 plugin."""
    instructions = _instructions()
    env = " ".join(args for instruction, args in instructions if instruction == "ENV")
    assert "MODSTREAM_HOME=/opt/modstream" in env
    assert ("WORKDIR", "/opt/modstream") in instructions
    copies = [args.split() for instruction, args in instructions if instruction == "COPY"]
    copied = {source for *sources, _ in copies for source in sources}
    assert {"modstream", "policy_rules"} <= copied
    assert set(BUILT) <= copied
    for source in copied - set(BUILT):
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    runs = " ".join(args for instruction, args in instructions if instruction == "RUN")
    assert "ln -sf /usr/local/bin/python3.11 /usr/bin/python3" in runs
    assert "cp /opt/flink/opt/flink-python-*.jar /opt/flink/lib/" in runs
    assert "/opt/flink/plugins/s3-fs-presto" in runs
    assert "plugins/metrics-prometheus" in runs
    # The per-version code compiled in the image by the mypy that checks it here.
    assert f"pip install mypy=={version('mypy')}" in runs
    assert 'native.main(["build"])' in runs and 'native.in_use() == "compiled"' in runs


def _docker_unavailable() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI on this machine"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return f"docker CLI present but no daemon answers: {info.stderr.strip()[:200]}"
    missing = [path for path in BUILT if not (ROOT / path).exists()]
    if missing:
        return f"{', '.join(missing)} missing: run `make setup` first"
    return None


@pytest.mark.timeout(3600)
def test_the_image_builds_and_holds_the_jobs() -> None:
    reason = _docker_unavailable()
    if reason is not None:
        pytest.skip(f"Dockerfile not built: {reason}")
    build = subprocess.run(
        ["docker", "build", "-f", str(DOCKERFILE), "-t", TAG, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=3500,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    check = (
        "test -f /opt/modstream/modstream/jobs/moderation/job.py"
        f" && test -f /opt/flink/lib/flink-python-{FLINK_VERSION}.jar"
        f" && test -f /opt/flink/opt/flink-python-{FLINK_VERSION}.jar"
        " && /usr/bin/python3 -c 'import modstream.jobs.moderation.job, modstream.jobs.scan.job,"
        " modstream.jobs.enforce, modstream.jobs.reconciler'"
    )
    run = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", TAG, "-c", check],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
