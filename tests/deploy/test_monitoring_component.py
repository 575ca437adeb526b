"""The optional monitoring component, for the Prometheus Operator: a ServiceMonitor that scrapes the web's /metrics
with METRICS_TOKEN, and a PrometheusRule whose alerts ask only for series /metrics serves."""

import re
import shutil

import pytest
import yaml

from tests.deploy.manifests import BASE, by_kind, rendered_objects, source_objects

COMPONENT = BASE / "monitoring"


def test_the_base_ships_no_prometheus_operator_object_unless_the_component_is_added():
    assert not [obj for obj in source_objects() if obj["apiVersion"].startswith("monitoring.coreos.com/")]
    assert yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())["kind"] == "Component"


def test_the_service_monitor_scrapes_the_web_service_port_with_the_metrics_token():
    monitor = by_kind(source_objects(COMPONENT), "ServiceMonitor")["gangway-web"]
    service = by_kind(source_objects(), "Service")["gangway-web"]
    base = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    service_labels = {**service["metadata"].get("labels", {}), **base["labels"][0]["pairs"]}

    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {"type": "Bearer",
                                         "credentials": {"name": "gangway-secrets", "key": "METRICS_TOKEN"}}


@pytest.mark.django_db
def test_every_series_an_alert_reads_is_served(client, busy_world):
    rule = by_kind(source_objects(COMPONENT), "PrometheusRule")["gangway"]
    alerts = [alert for group in rule["spec"]["groups"] for alert in group["rules"]]
    read = {name for alert in alerts for name in re.findall(r"\bgangway_\w+", alert["expr"])}
    served = set(re.findall(r"^# TYPE (gangway_\w+)", client.get("/metrics").content.decode(), re.M))

    assert {alert["alert"] for alert in alerts} == {"GangwayAdmissionLoopStopped", "GangwayAdmissionCyclesFailing",
                                                    "GangwayClusterUnreachable", "GangwayTasksFailing"}  # fmt: skip
    assert sorted(read - served) == []
    for alert in alerts:
        assert alert["labels"]["severity"] in {"critical", "warning"}
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]


def test_added_as_the_readme_says_it_renders_beside_the_base(tmp_path):
    base = tmp_path / "kubernetes"
    shutil.copytree(BASE, base)
    with (base / "kustomization.yaml").open("a") as kustomization:
        kustomization.write("components:\n  - monitoring\n")
    rendered = rendered_objects(base)
    if rendered is None:
        pytest.skip("kubectl is not installed")

    assert len(rendered) == len(source_objects()) + 2
    monitor = by_kind(rendered, "ServiceMonitor")["gangway-web"]
    service = by_kind(rendered, "Service")["gangway-web"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == "gangway"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
