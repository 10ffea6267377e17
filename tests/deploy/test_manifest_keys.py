"""deploy/k8s holds to the secure defaults (issue 27, point 3): no insecure setting, no dev
secret, and each pod mounts only the Secret items its job verifies or signs with, never the
whole Secret; the scan pod, which parses hostile media, holds detectors' keys only."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from modstream.testing.k8s import (
    example_secret,
    flink_deployment,
    job_environment,
    main_container,
    mounted_secret_files,
)
from modstream.trust.keyring import AUTHORITY_TOPIC_NAMES, Keyring, read_keys_file

COMPONENTS = ("moderation", "scan", "enforce", "reconciler")
# The jobs that verify or sign authority records, and the roles their keys file may hold.
SIGNING_ROLES = {
    "moderation": {"detector", "reviewer", "bank", "appeals", "approver", "author", "lead"},
    "scan": {"detector"},
}
KEYS_FILE = "MODSTREAM_SIGNING_KEYS_FILE"


def env_names(component: str) -> set[str]:
    return {item["name"] for item in main_container(flink_deployment(component)).get("env", [])}


@pytest.mark.parametrize("component", COMPONENTS)
def test_no_deployment_lowers_the_defaults_or_uses_a_dev_secret(component: str) -> None:
    names = env_names(component)
    assert not {name for name in names if name.startswith("MODSTREAM_INSECURE_")}
    assert "MODSTREAM_SIGNING_DEV_SECRET" not in names
    assert "MODSTREAM_SIGNATURES_REQUIRED" not in names  # retired: the default is all
    assert "MODSTREAM_REQUIRE_APPROVAL" not in names


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_pod_mounts_only_the_secret_items_its_job_needs(component: str) -> None:
    deployment = flink_deployment(component)
    for volume in deployment["spec"]["podTemplate"]["spec"]["volumes"]:
        if "secret" in volume:
            assert volume["secret"].get("items"), f"{component}: the whole Secret is mounted"
    mounted = set(mounted_secret_files(deployment).values())
    signing = {key for key in mounted if key.startswith("signing-keys")}
    if component in SIGNING_ROLES:
        assert signing == {f"signing-keys-{component}.json"}
        assert KEYS_FILE in env_names(component)
    else:
        assert signing == set() and KEYS_FILE not in env_names(component)
    assert "policy-key" not in mounted  # an environment variable, and the moderation job's only


@pytest.mark.parametrize("component", sorted(SIGNING_ROLES))
def test_a_jobs_keys_file_is_mounted_and_holds_only_its_roles(
    component: str, tmp_path: Path
) -> None:
    env = job_environment(component, tmp_path)
    keyring = Keyring.from_env(env)
    assert keyring.keys, f"{component}: the example keys file is empty"
    assert {entry.role for entry in keyring.keys.values()} <= SIGNING_ROLES[component]
    assert keyring.dev_secret is None
    assert keyring.required == AUTHORITY_TOPIC_NAMES and keyring.require_approval


def test_the_scan_pod_holds_no_key_but_its_detectors() -> None:
    secret = example_secret()
    scan = json.loads(secret["signing-keys-scan.json"])
    moderation = json.loads(secret["signing-keys-moderation.json"])
    assert {entry["role"] for entry in scan.values()} == {"detector"}
    # The detectors' keys the moderation job verifies with are the ones the scan job signs with.
    detectors = {name: e for name, e in moderation.items() if e["role"] == "detector"}
    assert detectors == scan
    for key in ("policy-key", "signing-keys-moderation.json"):
        paths = mounted_secret_files(flink_deployment("scan"))
        assert key not in paths.values()
        assert PurePosixPath("/etc/modstream/secrets") / key not in paths


def test_every_example_keys_file_parses(tmp_path: Path) -> None:
    for name, content in example_secret().items():
        if name.startswith("signing-keys"):
            path = tmp_path / name
            path.write_text(content)
            assert read_keys_file(path)
