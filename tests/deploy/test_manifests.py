"""Every manifest of deploy/k8s parses and carries what its operator requires (docs/DEPLOY.md).

No cluster here: the checks are the Flink Kubernetes Operator's own validation rules
(DefaultValidator: name pattern, flinkVersion, checkpoint and savepoint directories for
upgradeMode savepoint, resources, forbidden keys), the jobs' own option parsers (an option a
deployment passes that its job no longer takes fails here, not in a pod), the topics of
modstream/core/topics.py, and every Secret, ConfigMap and volume a deployment names.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import re
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from modstream.core.config import ROCKSDB_OPTIONS, Settings
from modstream.core.topics import TOPICS
from modstream.jobs import enforce, reconciler
from modstream.jobs.moderation import job as moderation
from modstream.jobs.scan import config as scan_config
from modstream.scanning import pools as scan_pools
from modstream.stack.k8s import kafka_topics_yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
# Where the Dockerfile puts the project (WORKDIR, MODSTREAM_HOME).
IMAGE_HOME = PurePosixPath("/opt/modstream")
JOBS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "moderation": moderation.options,
    "scan": scan_config.options,
    "enforce": enforce.options,
    "reconciler": reconciler.options,
}
FLINK_VERSION = version("apache-flink")  # 2.2.1: the image, the jar and the enum must agree
OPERATOR_FLINK_VERSION = "v{}_{}".format(*FLINK_VERSION.split(".")[:2])
# The operator's DefaultValidator: DEPLOYMENT_NAME_PATTERN and FORBIDDEN_CONF_KEYS.
DEPLOYMENT_NAME = re.compile(r"[a-z]([-a-z\d]{0,43}[a-z\d])?")
FORBIDDEN_CONF_KEYS = (
    "kubernetes.namespace",
    "kubernetes.cluster-id",
    "high-availability.cluster-id",
)
REQUIRED_CONF = {
    "execution.checkpointing.dir": None,
    "execution.checkpointing.savepoint-dir": None,
    "high-availability.type": "kubernetes",
    "high-availability.storageDir": None,
    "python.execution-mode": "thread",
    "state.backend.type": None,
    "metrics.reporter.prom.factory.class": (
        "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
    ),
    "metrics.reporter.prom.port": None,
}
# Kafka's default transaction.max.timeout.ms (Strimzi keeps it): a sink asking for more fails.
BROKER_MAX_TRANSACTION_TIMEOUT_MS = 900_000
# Files the example Secret shows but kustomization.yaml must not apply, and optional extras.
NOT_IN_KUSTOMIZATION = {"kustomization.yaml", "secret.example.yaml", "podmonitor.yaml"}
SECRET = "modstream-secrets"


def _load() -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document is not None:
                documents.append((path.name, document))
    return documents


MANIFESTS = _load()
FLINK = [doc for _, doc in MANIFESTS if doc.get("kind") == "FlinkDeployment"]


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in MANIFESTS if doc.get("kind") == kind}


# --- what a FlinkDeployment must carry -------------------------------------------------------


def flink_problems(deployment: dict[str, Any]) -> list[str]:
    """What the operator would refuse, or the job would do otherwise than the manifest says."""
    spec = deployment.get("spec") or {}
    problems = _operator_problems(deployment, spec)
    conf = spec.get("flinkConfiguration") or {}
    problems += _configuration_problems(conf)
    job = spec.get("job") or {}
    problems += _job_spec_problems(job)
    if isinstance(job.get("args"), list):
        problems += _args_problems(job["args"], job, conf, spec.get("podTemplate") or {})
    problems += _pod_template_problems(spec.get("podTemplate") or {}, conf)
    return problems


def _operator_problems(deployment: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    problems = []
    if deployment.get("apiVersion") != "flink.apache.org/v1beta1":
        problems.append(f"apiVersion {deployment.get('apiVersion')!r}")
    name = (deployment.get("metadata") or {}).get("name") or ""
    if not DEPLOYMENT_NAME.fullmatch(name):
        problems.append(f"metadata.name {name!r} is not a valid FlinkDeployment name")
    if not spec.get("image"):
        problems.append("spec.image missing")
    if spec.get("flinkVersion") != OPERATOR_FLINK_VERSION:
        problems.append(
            f"spec.flinkVersion {spec.get('flinkVersion')!r}, not {OPERATOR_FLINK_VERSION}"
        )
    if spec.get("serviceAccount") not in _of_kind("ServiceAccount"):
        problems.append(f"spec.serviceAccount {spec.get('serviceAccount')!r} is not in deploy/k8s")
    for part in ("jobManager", "taskManager"):
        resource = (spec.get(part) or {}).get("resource") or {}
        cpu, memory = resource.get("cpu"), resource.get("memory")
        if not isinstance(cpu, int | float) or isinstance(cpu, bool) or cpu <= 0:
            problems.append(f"spec.{part}.resource.cpu {cpu!r}")
        if not isinstance(memory, str) or not re.fullmatch(r"\d+[mg]", memory):
            problems.append(f"spec.{part}.resource.memory {memory!r}")
    if (spec.get("jobManager") or {}).get("replicas", 1) < 1:
        problems.append("spec.jobManager.replicas below one")
    return problems


def _configuration_problems(conf: dict[str, Any]) -> list[str]:
    problems = [
        f"flinkConfiguration {key} = {value!r} is not a string"
        for key, value in conf.items()
        if not isinstance(value, str)
    ]
    for key, wanted in REQUIRED_CONF.items():
        if not conf.get(key):
            problems.append(f"flinkConfiguration {key} missing")
        elif wanted is not None and conf[key] != wanted:
            problems.append(f"flinkConfiguration {key} = {conf[key]!r}, not {wanted!r}")
    for key in (
        "execution.checkpointing.dir",
        "execution.checkpointing.savepoint-dir",
        "high-availability.storageDir",
    ):
        if conf.get(key) and "://" not in str(conf[key]):
            problems.append(f"flinkConfiguration {key} is not a URI every pod shares")
    problems += [
        f"flinkConfiguration {key} is set by the operator"
        for key in FORBIDDEN_CONF_KEYS
        if key in conf
    ]
    return problems


def _job_spec_problems(job: dict[str, Any]) -> list[str]:
    wanted = {
        "jarURI": f"local:///opt/flink/opt/flink-python-{FLINK_VERSION}.jar",
        "entryClass": "org.apache.flink.client.python.PythonDriver",
        "upgradeMode": "savepoint",
        "state": "running",
    }
    problems = [
        f"spec.job.{key} {job.get(key)!r}, not {value!r}"
        for key, value in wanted.items()
        if job.get(key) != value
    ]
    if not isinstance(job.get("parallelism"), int) or job["parallelism"] < 1:
        problems.append(f"spec.job.parallelism {job.get('parallelism')!r}")
    args = job.get("args")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        problems.append("spec.job.args must be a list of strings")
    return problems


def _args_problems(
    args: list[str], job: dict[str, Any], conf: dict[str, Any], template: dict[str, Any]
) -> list[str]:
    """The PythonDriver's arguments, then the job's own, parsed by the job's parser."""
    if len(args) < 4 or args[0] != "-pyclientexec" or args[2] != "-pym":
        return [f"spec.job.args must start -pyclientexec PYTHON -pym MODULE, not {args[:4]}"]
    problems = []
    if conf.get("python.client.executable") != args[1]:
        problems.append(f"-pyclientexec {args[1]} is not python.client.executable")
    module = args[3]
    package, _, name = module.rpartition(".")
    if package != "modstream.jobs" or name not in JOBS:
        return [*problems, f"-pym {module}: not one of modstream.jobs.{{{','.join(sorted(JOBS))}}}"]
    if importlib.util.find_spec(module) is None:
        problems.append(f"-pym {module}: no such module in the repository")
    parsed, parse_problems = parse_job_args(name, args[4:])
    if parsed is None:
        return [*problems, *parse_problems]
    return problems + _parsed_problems(name, parsed, job, conf, template)


def parse_job_args(job: str, argv: list[str]) -> tuple[argparse.Namespace | None, list[str]]:
    """The job's options as its own parser reads them, or why it refuses them."""
    parser = JOBS[job]()
    parser.exit_on_error = False
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parsed, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as error:
        return None, [f"{job}: {error}"]
    if unknown:
        return None, [f"{job} does not take {' '.join(unknown)}"]
    return parsed, []


def _parsed_problems(
    name: str,
    parsed: argparse.Namespace,
    job: dict[str, Any],
    conf: dict[str, Any],
    template: dict[str, Any],
) -> list[str]:
    problems = []
    if parsed.parallelism != job.get("parallelism"):
        problems.append(
            f"--parallelism {parsed.parallelism} but spec.job.parallelism is "
            f"{job.get('parallelism')}"
        )
    if not parsed.transactional_id_prefix:
        problems.append("--transactional-id-prefix missing: one per deployment")
    if parsed.transaction_timeout_ms > BROKER_MAX_TRANSACTION_TIMEOUT_MS:
        problems.append("--transaction-timeout-ms above the brokers' maximum")
    if parsed.restore_from != "none":
        problems.append("--restore-from must be none: the operator restores from savepoints")
    job_conf = dict(parsed.flink_conf)
    # The job sets execution.checkpointing.dir itself (modstream/jobs/runtime.py create_env):
    # without this it would checkpoint to the pod's local disk whatever flinkConfiguration says.
    problems += [
        f"--flink-conf {key}={job_conf.get(key)!r} differs from flinkConfiguration"
        for key in {*job_conf, "execution.checkpointing.dir"}
        if key in conf and job_conf.get(key) != conf[key]
    ]
    mounts = {mount["mountPath"] for mount in _main_container(template).get("volumeMounts", [])}
    for option in ("media_dir", "media_root", "policy"):
        value = getattr(parsed, option, None)
        if value is not None and not _in_image_or_mounts(PurePosixPath(str(value)), mounts):
            problems.append(
                f"{name} --{option.replace('_', '-')} {value} is neither in the "
                "image nor on a mounted volume"
            )
    return problems


def _in_image_or_mounts(path: PurePosixPath, mounts: set[str]) -> bool:
    if path.is_relative_to(IMAGE_HOME):
        return (ROOT / path.relative_to(IMAGE_HOME)).exists()
    return any(path.is_relative_to(mount) for mount in mounts)


def _main_container(template: dict[str, Any]) -> dict[str, Any]:
    containers = (template.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == "flink-main-container"), {})


def _pod_template_problems(template: dict[str, Any], conf: dict[str, Any]) -> list[str]:
    container = _main_container(template)
    if not container:
        return ["podTemplate has no container flink-main-container"]
    problems = list(_reference_problems(template, container))
    ports = {port.get("name"): port.get("containerPort") for port in container.get("ports", [])}
    if str(ports.get("metrics")) != conf.get("metrics.reporter.prom.port"):
        problems.append("container port `metrics` is not metrics.reporter.prom.port")
    env = {item["name"]: item for item in container.get("env", [])}
    config_file = (env.get("MODSTREAM_CONFIG") or {}).get("value")
    if not config_file or _mounted_key(template, container, config_file) is None:
        problems.append(f"MODSTREAM_CONFIG {config_file!r} is not a key of a mounted ConfigMap")
    for variable in ("MODSTREAM_KAFKA__SASL_PASSWORD", "MODSTREAM_REDIS__URL"):
        if "secretKeyRef" not in ((env.get(variable) or {}).get("valueFrom") or {}):
            problems.append(f"{variable} does not come from a Secret")
    labels = (template.get("metadata") or {}).get("labels") or {}
    for monitor in _of_kind("PodMonitor").values():
        wanted = monitor["spec"]["selector"]["matchLabels"]
        if any(labels.get(key) != value for key, value in wanted.items()):
            problems.append(
                f"the pods' labels do not match PodMonitor {monitor['metadata']['name']}"
            )
    return problems


def _reference_problems(template: dict[str, Any], container: dict[str, Any]) -> Iterator[str]:
    """Every Secret key, ConfigMap and claim the pod names exists in deploy/k8s."""
    secrets, config_maps = _of_kind("Secret"), _of_kind("ConfigMap")
    claims = _of_kind("PersistentVolumeClaim")
    for item in container.get("env", []):
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref and ref["key"] not in _keys(secrets.get(ref["name"])):
            yield f"env {item['name']}: Secret {ref['name']} has no key {ref['key']}"
    volume_names = set()
    for volume in (template.get("spec") or {}).get("volumes", []):
        volume_names.add(volume["name"])
        if "secret" in volume and volume["secret"]["secretName"] not in secrets:
            yield f"volume {volume['name']}: no Secret {volume['secret']['secretName']}"
        if "configMap" in volume and volume["configMap"]["name"] not in config_maps:
            yield f"volume {volume['name']}: no ConfigMap {volume['configMap']['name']}"
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim is not None and claim not in claims:
            yield f"volume {volume['name']}: no PersistentVolumeClaim {claim}"
    for mount in container.get("volumeMounts", []):
        if mount["name"] not in volume_names:
            yield f"volumeMount {mount['name']} names no volume"


def _keys(document: dict[str, Any] | None) -> set[str]:
    if document is None:
        return set()
    return {*(document.get("data") or {}), *(document.get("stringData") or {})}


def _mounted_key(template: dict[str, Any], container: dict[str, Any], path: str) -> str | None:
    """The content of the ConfigMap or Secret key mounted at `path` in the container, if any."""
    volumes = {v["name"]: v for v in (template.get("spec") or {}).get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        target = PurePosixPath(path)
        if target.parent != PurePosixPath(mount["mountPath"]):
            continue
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume:
            source = _of_kind("ConfigMap").get(volume["configMap"]["name"])
        elif "secret" in volume:
            source = _of_kind("Secret").get(volume["secret"]["secretName"])
        else:
            continue
        data = {**((source or {}).get("data") or {}), **((source or {}).get("stringData") or {})}
        if target.name in data:
            return str(data[target.name])
    return None


# --- the tests --------------------------------------------------------------------------------


def test_every_manifest_is_a_kubernetes_object_in_the_modstream_namespace() -> None:
    assert MANIFESTS, "no manifest under deploy/k8s"
    seen = set()
    for file, doc in MANIFESTS:
        if doc.get("kind") == "Kustomization":
            continue  # read by kustomize, not applied
        assert doc.get("apiVersion") and doc.get("kind"), f"{file}: apiVersion and kind"
        name = (doc.get("metadata") or {}).get("name")
        assert name, f"{file}: metadata.name"
        if doc["kind"] not in ("Namespace", "Kustomization"):
            assert doc["metadata"].get("namespace") == "modstream", f"{file}: {name} namespace"
        assert (doc["kind"], name) not in seen, f"{file}: {doc['kind']} {name} twice"
        seen.add((doc["kind"], name))


def test_each_job_has_one_flink_deployment_and_the_scan_job_one_per_modality_pool() -> None:
    scripts = [d["spec"]["job"]["args"][3].rpartition(".")[2] for d in FLINK]
    assert sorted(set(scripts)) == sorted(JOBS)
    assert sorted(s for s in scripts if s != "scan") == sorted(set(JOBS) - {"scan"})
    scans = [d for d in FLINK if d["spec"]["job"]["args"][3].rpartition(".")[2] == "scan"]
    pools = [
        scan_config.pools_from(scan_config.options().parse_args(d["spec"]["job"]["args"][4:]))
        for d in scans
    ]
    assert all(len(one) == 1 for one in pools)  # one pool per deployment
    served = sorted(m for one in pools for pool in one for m in pool.modalities)
    assert served == sorted(scan_pools.MODALITIES)  # every modality scanned, once
    assert sorted(d["metadata"]["labels"]["modstream.io/scan-pool"] for d in scans) == sorted(
        pool.name for one in pools for pool in one
    )


@pytest.mark.parametrize("deployment", FLINK, ids=[d["metadata"]["name"] for d in FLINK])
def test_a_flink_deployment_has_what_the_operator_and_its_job_require(
    deployment: dict[str, Any],
) -> None:
    assert flink_problems(deployment) == []


def test_deployments_share_no_state_and_no_transactional_ids() -> None:
    """Two deployments on one prefix fence each other's transactions; on one directory, they
    overwrite each other's checkpoints, savepoints or HA metadata."""
    for key in (
        "execution.checkpointing.dir",
        "execution.checkpointing.savepoint-dir",
        "high-availability.storageDir",
    ):
        values = [d["spec"]["flinkConfiguration"][key] for d in FLINK]
        assert len(set(values)) == len(values), key
    prefixes = []
    for deployment in FLINK:
        args = deployment["spec"]["job"]["args"]
        parsed, problems = parse_job_args(args[3].rpartition(".")[2], args[4:])
        assert parsed is not None, problems
        prefixes.append(parsed.transactional_id_prefix)
    assert len(set(prefixes)) == len(prefixes)


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (lambda s: s["flinkConfiguration"].pop("execution.checkpointing.savepoint-dir"),
         "savepoint-dir missing"),
        (lambda s: s.update(flinkVersion="v2_1"), "spec.flinkVersion"),
        (lambda s: s["job"].update(upgradeMode="stateless"), "upgradeMode"),
        (lambda s: s["job"]["args"].extend(["--no-such-option", "1"]), "does not take"),
        (lambda s: s["job"]["args"].extend(["--parallelism", "many"]), "invalid int"),
        (lambda s: s["job"].update(parallelism=3), "spec.job.parallelism is 3"),
        (lambda s: s["flinkConfiguration"].update({"execution.checkpointing.dir": "s3://x/y"}),
         "--flink-conf execution.checkpointing.dir"),
        (lambda s: s["jobManager"]["resource"].pop("memory"), "jobManager.resource.memory"),
        (lambda s: s["flinkConfiguration"].update({"kubernetes.cluster-id": "x"}), "operator"),
        (lambda s: s["podTemplate"]["spec"]["containers"][0]["env"].append(
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "nope"}}}),
         "has no key nope"),
        (lambda s: s["job"]["args"].__setitem__(3, "modstream.jobs.nothing"), "not one of"),
    ],
)  # fmt: skip
def test_the_check_finds_a_broken_deployment(
    break_it: Callable[[dict[str, Any]], object], expected: str
) -> None:
    deployment = copy.deepcopy(
        next(d for d in FLINK if d["metadata"]["name"].endswith("moderation"))
    )
    break_it(deployment["spec"])
    problems = flink_problems(deployment)
    assert any(expected in problem for problem in problems), problems


def test_the_config_map_holds_valid_settings_that_agree_with_flink(tmp_path: Path) -> None:
    """modstream.toml in the ConfigMap loads through Settings (as every job reads it), and the
    Flink settings it makes agree with each FlinkDeployment's."""
    toml = _of_kind("ConfigMap")["modstream-config"]["data"]["modstream.toml"]
    (tmp_path / "modstream.toml").write_text(toml, encoding="utf-8")
    settings = Settings.from_env(
        {
            "MODSTREAM_CONFIG": str(tmp_path / "modstream.toml"),
            "MODSTREAM_KAFKA__SASL_PASSWORD": "x",
        }
    )
    assert settings.kafka.sasl and settings.kafka.ssl_cafile is not None
    for deployment in FLINK:
        conf = deployment["spec"]["flinkConfiguration"]
        for key, value in settings.flink.conf().items():
            assert conf.get(key, value) == value, f"{deployment['metadata']['name']}: {key}"
        template = deployment["spec"]["podTemplate"]
        container = _main_container(template)
        assert _mounted_key(template, container, str(settings.kafka.ssl_cafile)) is not None
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        if deployment["metadata"]["name"] != "modstream-moderation":
            assert str(settings.media_root) in mounts  # scan reads, enforce and reconciler purge


def test_every_rocksdb_deployment_runs_rocksdb_with_the_jobs_options() -> None:
    """The options every job sets on the rocksdb backend (ROCKSDB_OPTIONS, measured in
    docs/BENCHMARKS.md) written out in each FlinkDeployment that keeps its state in RocksDB, so
    the cluster runs what the bench measured whichever configuration a job is started with."""
    rocks = [d for d in FLINK if d["spec"]["flinkConfiguration"]["state.backend.type"] == "rocksdb"]
    assert rocks
    for deployment in rocks:
        conf = deployment["spec"]["flinkConfiguration"]
        for key, value in ROCKSDB_OPTIONS.items():
            assert conf.get(key) == value, f"{deployment['metadata']['name']}: {key}"


def test_the_kafka_topics_are_the_ones_modstream_topics_defines() -> None:
    checked_in = (K8S / "kafka-topics.yaml").read_text(encoding="utf-8")
    assert checked_in == kafka_topics_yaml(), (
        "deploy/k8s/kafka-topics.yaml is stale: regenerate it with `python -m modstream.stack.k8s`"
    )
    topics = _of_kind("KafkaTopic")
    assert set(topics) == {spec.name for spec in TOPICS}
    for spec in TOPICS:
        topic = topics[spec.name]
        assert topic["apiVersion"] == "kafka.strimzi.io/v1beta2"
        assert topic["metadata"]["labels"]["strimzi.io/cluster"]
        assert topic["spec"]["partitions"] == spec.partitions, spec.name
        assert topic["spec"]["config"] == spec.config, spec.name
        assert topic["spec"]["replicas"] >= 1


def test_the_kustomization_applies_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    listed = set(kustomization["resources"])
    assert listed == {path.name for path in K8S.glob("*.yaml")} - NOT_IN_KUSTOMIZATION


def test_every_scan_pool_keeps_raw_output_where_the_review_console_reads_it() -> None:
    """Each pool writes its results' raw output (`--raw-output-dir`) onto one claim, mounted
    writable there; the console mounts the same claim read-only at the directory it is given
    (the task page's words read and heard come from it)."""
    console = _of_kind("Deployment")["modstream-review-console"]["spec"]["template"]
    [console_container] = console["spec"]["containers"]
    console_args = console_container["args"]
    console_dir = console_args[console_args.index("--raw-output-dir") + 1]
    claims = set()
    for template, container, directory, read_only in [
        (console, console_container, console_dir, True)
    ] + [
        (d["spec"]["podTemplate"], _main_container(d["spec"]["podTemplate"]),
         str(scan_config.options().parse_args(d["spec"]["job"]["args"][4:]).raw_output_dir),
         False)
        for d in FLINK if d["metadata"]["name"].startswith("modstream-scan-")
    ]:  # fmt: skip
        [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
        assert bool(mount.get("readOnly")) is read_only, directory
        volumes = {volume["name"]: volume for volume in template["spec"]["volumes"]}
        claims.add(volumes[mount["name"]]["persistentVolumeClaim"]["claimName"])
    assert claims == {"modstream-raw-output"}
    assert "modstream-raw-output" in _of_kind("PersistentVolumeClaim")
