"""What deploy/k8s gives each job: its container's environment and the Secret items its pod
mounts, read from the manifests (for tests/deploy and the integration test that starts a job
with that environment). Reads the project's deploy/k8s: a checkout's, not an installed
package's."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from modstream.core.config import PROJECT_ROOT

K8S = PROJECT_ROOT / "deploy" / "k8s"
SECRET_EXAMPLE = K8S / "secret.example.yaml"


def _documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return found


def flink_deployment(component: str) -> dict[str, Any]:
    """The FlinkDeployment of `component` (moderation, scan, enforce, reconciler)."""
    for doc in _documents():
        labels = (doc.get("metadata") or {}).get("labels") or {}
        if (
            doc.get("kind") == "FlinkDeployment"
            and labels.get("app.kubernetes.io/component") == component
        ):
            return doc
    raise LookupError(f"no FlinkDeployment of component {component}")


def main_container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["podTemplate"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "flink-main-container")


def example_secret() -> dict[str, str]:
    return dict(yaml.safe_load(SECRET_EXAMPLE.read_text(encoding="utf-8"))["stringData"])


def mounted_secret_files(deployment: dict[str, Any]) -> dict[PurePosixPath, str]:
    """Path in the pod -> Secret key, for every Secret item the pod mounts; a volume without
    `items` mounts every key of the example Secret."""
    volumes = {v["name"]: v for v in deployment["spec"]["podTemplate"]["spec"]["volumes"]}
    files: dict[PurePosixPath, str] = {}
    for mount in main_container(deployment).get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            continue
        items = secret.get("items") or [{"key": k, "path": k} for k in example_secret()]
        for item in items:
            files[PurePosixPath(mount["mountPath"]) / item["path"]] = item["key"]
    return files


def job_environment(component: str, root: Path) -> dict[str, str]:
    """The environment the manifest gives the job, for a job started on a test stack: every
    plain `value`, a path to a mounted Secret item rewritten to that item of the example
    Secret written under `root`; left out is what names the cluster itself (MODSTREAM_CONFIG,
    the ConfigMap with the cluster's brokers and TLS) and values from Secret references (the
    cluster's credentials)."""
    deployment = flink_deployment(component)
    secret = example_secret()
    files = mounted_secret_files(deployment)
    env = {}
    for item in main_container(deployment).get("env", []):
        if "value" not in item or item["name"] == "MODSTREAM_CONFIG":
            continue
        value = str(item["value"])
        key = files.get(PurePosixPath(value))
        if key is not None:
            local = root / key
            local.write_text(secret[key], encoding="utf-8")
            value = str(local)
        env[item["name"]] = value
    return env
