"""The optional network-policy component: only the Ingress controller's namespace and Prometheus's reach the web's
port, so that no other pod writes its own address into X-Forwarded-For (portal/addresses.py)."""

import shutil

import kubernetes_validate
import pytest
import yaml

from tests.deploy.manifests import BASE, by_kind, rendered_objects, source_objects

VERSION = kubernetes_validate.latest_version()
COMPONENT = BASE / "network-policy"


def web_pod(objects: list[dict]) -> dict:
    return by_kind(objects, "Deployment")["gangway-web"]["spec"]["template"]


def test_the_base_ships_no_policy_unless_the_component_is_added():
    assert by_kind(source_objects(), "NetworkPolicy") == {}
    assert "components" not in yaml.safe_load((BASE / "kustomization.yaml").read_text())
    assert yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())["kind"] == "Component"


def test_it_lets_only_the_ingress_controller_and_prometheus_reach_the_web_port():
    policy = by_kind(source_objects(COMPONENT), "NetworkPolicy")["gangway-web"]
    kubernetes_validate.validate(policy, VERSION, strict=True)
    web = web_pod(source_objects())
    port = web["spec"]["containers"][0]["ports"][0]

    assert policy["spec"]["podSelector"]["matchLabels"].items() <= web["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    allowed = []
    for rule in policy["spec"]["ingress"]:
        assert rule["ports"] == [{"port": port["name"], "protocol": "TCP"}]
        for source in rule["from"]:
            assert list(source) == ["namespaceSelector"]  # a whole namespace, never every pod or address
            allowed.append(source["namespaceSelector"]["matchLabels"])
    assert allowed == [{"kubernetes.io/metadata.name": "ingress-nginx"}, {"kubernetes.io/metadata.name": "monitoring"}]


def test_added_as_the_readme_says_it_renders_valid_and_selects_the_web_pods_alone(tmp_path):
    base = tmp_path / "kubernetes"
    shutil.copytree(BASE, base)
    with (base / "kustomization.yaml").open("a") as kustomization:
        kustomization.write("components:\n  - network-policy\n")
    rendered = rendered_objects(base)
    if rendered is None:
        pytest.skip("kubectl is not installed")

    assert len(rendered) == len(source_objects()) + 1
    for obj in rendered:
        kubernetes_validate.validate(obj, VERSION, strict=True)
    policy = by_kind(rendered, "NetworkPolicy")["gangway-web"]
    assert policy["metadata"]["namespace"] == "gangway"
    selector = policy["spec"]["podSelector"]["matchLabels"].items()
    pods = {name: d["spec"]["template"]["metadata"]["labels"].items() for name, d in by_kind(rendered, "Deployment").items()}
    assert {name for name, labels in pods.items() if selector <= labels} == {"gangway-web"}
    service = by_kind(rendered, "Service")["gangway-web"]
    assert service["spec"]["ports"][0]["targetPort"] == policy["spec"]["ingress"][0]["ports"][0]["port"]
