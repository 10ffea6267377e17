"""Which batched operators run their Python in a worker process (deploy/flink-ext
EmbeddedPython.java): every one with `modstream.python.worker-process=true`, those named in
`modstream.python.worker-process-for`, none by default. Driven through the JVM gateway."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration  # needs a JVM (the gateway), not the stack

HANDLERS = ("BatchedDecode", "BatchedModerate", "BatchedRetro", "BatchedSanctions")


def in_workers(jvm: Any, options: dict[str, str]) -> set[str]:
    """The handlers an environment with `options` puts in worker processes."""
    conf = jvm.org.apache.flink.configuration.Configuration()
    for key, value in options.items():
        conf.setString(key, value)
    env = jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment
    made = env.getExecutionEnvironment(conf)
    python = jvm.io.modstream.flink.EmbeddedPython
    return {name for name in HANDLERS if python.of(made, name).inWorkerProcess()}


def test_none_by_default(jvm: Any) -> None:
    assert in_workers(jvm, {}) == set()


def test_the_named_operators_only(jvm: Any) -> None:
    named = in_workers(jvm, {"modstream.python.worker-process-for": "decode;retro"})
    assert named == {"BatchedDecode", "BatchedRetro"}  # the version operator stays embedded


def test_every_operator_with_the_general_option(jvm: Any) -> None:
    assert in_workers(jvm, {"modstream.python.worker-process": "true"}) == set(HANDLERS)


def test_an_unknown_name_is_refused_with_the_known_ones(jvm: Any) -> None:
    from py4j.protocol import Py4JJavaError

    refused = "no operator named 'decode,retro'.*decode, moderate"
    with pytest.raises(Py4JJavaError, match=refused):
        in_workers(jvm, {"modstream.python.worker-process-for": "decode,retro"})  # not ';'
