"""deploy/k8s/review-console.yaml: the command is one `modstream review serve` accepts, every
Secret key it names is in the example Secret, and the media volume is mounted read-only (the
console shows evidence; it never changes the store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from modstream.cli.main import build_parser

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def documents() -> dict[str, dict[str, Any]]:
    text = (K8S / "review-console.yaml").read_text(encoding="utf-8")
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text)}


def test_the_console_runs_modstream_review_serve_with_options_it_takes() -> None:
    [container] = documents()["Deployment"]["spec"]["template"]["spec"]["containers"]
    command = container["command"] + container["args"]
    assert command[:3] == ["python3", "-m", "modstream.cli.main"]
    args = build_parser().parse_args(command[3:])
    assert (args.action, args.port, args.secure_cookies) == ("serve", 8800, True)
    assert {"name": "http", "containerPort": args.port} in container["ports"]


def test_its_secret_keys_are_in_the_example_and_the_media_is_read_only() -> None:
    example = yaml.safe_load((K8S / "secret.example.yaml").read_text(encoding="utf-8"))
    pod = documents()["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    named = {
        env["valueFrom"]["secretKeyRef"]["key"] for env in container["env"] if "valueFrom" in env
    }
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    named |= {item["key"] for item in volumes["modstream-secrets"]["secret"]["items"]}
    assert named <= set(example["stringData"])
    assert volumes["media"]["persistentVolumeClaim"]["readOnly"] is True
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert mounts["media"]["readOnly"] is True
