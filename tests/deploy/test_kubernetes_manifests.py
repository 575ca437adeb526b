"""The Kubernetes manifests: valid against the schemas, probes, resources, secrets by reference."""

import copy
import runpy
from pathlib import Path

import kubernetes_validate
import pytest

from portal.settings_reference import BY_NAME
from scheduling.log_download import DOWNLOAD_SECONDS
from tests.deploy.manifests import by_kind, rendered_objects, source_objects

ROOT = Path(__file__).resolve().parents[2]
VERSION = kubernetes_validate.latest_version()
OBJECTS = source_objects()


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda obj: f"{obj['kind']} {obj['metadata']['name']}")
def test_every_manifest_is_valid_against_the_kubernetes_schemas(obj):
    kubernetes_validate.validate(obj, VERSION, strict=True)


def test_the_rendered_kustomization_is_valid_too():
    rendered = rendered_objects()
    if rendered is None:
        pytest.skip("kubectl is not installed")
    assert len(rendered) == len(OBJECTS)
    for obj in rendered:
        kubernetes_validate.validate(obj, VERSION, strict=True)
        assert obj["metadata"].get("namespace", "gangway") == "gangway"
    images = {c["image"] for d in by_kind(rendered, "Deployment").values() for c in d["spec"]["template"]["spec"]["containers"]}
    assert len(images) == 1 and "gangway:" in images.pop()


def test_the_validator_refuses_a_broken_manifest():
    broken = copy.deepcopy(by_kind(OBJECTS, "Deployment")["gangway-web"])
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def containers():
    pods = [d["spec"]["template"]["spec"] for d in by_kind(OBJECTS, "Deployment").values()]
    pods += [j["spec"]["template"]["spec"] for j in by_kind(OBJECTS, "Job").values()]
    return [(pod, container) for pod in pods for container in pod.get("initContainers", []) + pod["containers"]]


def test_web_worker_notifier_beat_and_migrate_run_the_image_by_command():
    commands = {container["name"]: container["args"] for _, container in containers()}
    assert commands == {"web": ["web"], "worker": ["worker"], "notifier": ["notifier"], "beat": ["beat"],
                        "migrate": ["migrate"], "wait-for-schema": ["wait-for-schema"]}  # fmt: skip


def test_every_container_runs_locked_down_with_requests_and_limits():
    for pod, container in containers():
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        resources = container["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"} and "memory" in resources["limits"]


def test_the_web_is_ready_on_readyz_and_alive_on_healthz():
    web = by_kind(OBJECTS, "Deployment")["gangway-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"].startswith("/readyz")
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = by_kind(OBJECTS, "Service")["gangway-web"]
    assert service["spec"]["ports"][0]["targetPort"] == web["ports"][0]["name"]


def test_a_stopping_web_pod_serves_until_the_service_forgets_it_then_finishes_its_requests():
    pod = by_kind(OBJECTS, "Deployment")["gangway-web"]["spec"]["template"]["spec"]
    web = pod["containers"][0]
    pause = web["lifecycle"]["preStop"]["sleep"]["seconds"]  # the kubelet's sleep: the image runs nothing
    graceful = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))["graceful_timeout"]

    assert 5 <= pause <= 15  # endpoints reach kube-proxy and the Ingress controller within seconds
    assert graceful >= DOWNLOAD_SECONDS  # a whole-log download running when the pod stops ends whole
    assert pod["terminationGracePeriodSeconds"] >= pause + graceful + 5


def test_the_web_runs_on_the_oldest_kubernetes_the_base_supports():
    # The preStop sleep action is on by default from 1.30, as the ValidatingAdmissionPolicy the base ships.
    kubernetes_validate.validate(by_kind(OBJECTS, "Deployment")["gangway-web"], "1.30.0", strict=True)
    assert by_kind(OBJECTS, "ValidatingAdmissionPolicy")["gangway-queue-required"]["apiVersion"].endswith("/v1")


def test_only_the_worker_holds_the_scheduler_account_and_beat_runs_once():
    deployments = by_kind(OBJECTS, "Deployment")
    accounts = {name: d["spec"]["template"]["spec"]["serviceAccountName"] for name, d in deployments.items()}
    assert accounts == {"gangway-web": "gangway-web", "gangway-worker": "gangway-scheduler",
                        "gangway-notifier": "gangway", "gangway-beat": "gangway"}  # fmt: skip
    for name in ("gangway-notifier", "gangway-beat"):  # no token either: they never call the API server
        assert deployments[name]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    binding = by_kind(OBJECTS, "ClusterRoleBinding")["gangway-scheduler"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gangway-scheduler", "namespace": "gangway"}]
    beat = deployments["gangway-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"


def test_secrets_are_referenced_never_shipped_and_the_config_map_holds_known_settings():
    assert by_kind(OBJECTS, "Secret") == {}
    for _, container in containers():
        sources = container["envFrom"]
        assert {"secretRef": {"name": "gangway-secrets"}} in sources
        assert {"configMapRef": {"name": "gangway-config"}} in sources
    config = by_kind(OBJECTS, "ConfigMap")["gangway-config"]["data"]
    assert config["CLUSTER_BACKEND"] == "kubernetes"
    for name in config:
        assert name in BY_NAME, f"{name} is not a Gangway setting"
        assert not BY_NAME[name].secret, f"{name} is a secret: put it in gangway-secrets"
