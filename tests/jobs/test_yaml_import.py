"""TFJob and PyTorchJob manifests become job specs; what is not carried over is listed."""

from __future__ import annotations

import pytest

from jobs.spec import SpecError, parse_spec
from jobs.yaml_import import spec_from_yaml

TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: mnist
  namespace: maps
  labels: {app: mnist}
spec:
  runPolicy:
    activeDeadlineSeconds: 3600
    cleanPodPolicy: None
  tfReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {gpu: a100}
          containers:
            - name: tensorflow
              image: kubeflow/tf-mnist-with-summaries:latest
              command: [python, /var/tf_mnist/mnist_with_summaries.py]
              env:
                - {name: EPOCHS, value: "5"}
                - name: SECRET
                  valueFrom: {secretKeyRef: {name: s, key: k}}
              resources:
                limits: {nvidia.com/gpu: 1, cpu: "2", memory: 4Gi}
"""


def test_it_reads_a_tfjob_and_lists_what_it_drops():
    data, unsupported = spec_from_yaml(TFJOB)
    spec = parse_spec(data)
    assert (spec.name, spec.team, spec.kind, spec.max_runtime) == ("mnist", "maps", "TFJob", 3600)
    assert spec.replicas[0].count == 2 and spec.replicas[0].gpu == 1 and spec.replicas[0].cpu == 2000
    assert dict(spec.env) == {"EPOCHS": "5"}
    assert "metadata.labels" in unsupported
    assert "spec.runPolicy.cleanPodPolicy" in unsupported
    assert "spec.tfReplicaSpecs.Worker.template.spec.nodeSelector" in unsupported
    assert any("env[1]" in field for field in unsupported)


def test_unknown_top_level_keys_are_listed_too():
    text = TFJOB + "status: {conditions: []}\nextra: 1\n"
    _, unsupported = spec_from_yaml(text)
    assert {"status", "extra"} <= set(unsupported)
    assert not {"apiVersion", "kind", "metadata", "spec"} & set(unsupported)


def test_the_api_answers_them_in_unsupported(client, owner, nodes):
    client.force_login(owner)
    response = client.post("/api/v1/jobs/", data=TFJOB + "status: {}\n", content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert "status" in response.json()["unsupported"]


def test_gangway_spec_yaml_passes_through():
    data, unsupported = spec_from_yaml("name: a\nimage: busybox\nreplicas: [{role: Worker}]\n")
    assert data["name"] == "a" and unsupported == []


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("!!python/object:os.system {}\n", "Not valid YAML"),
        ("a: [1,\n", "Not valid YAML"),
        ("a: 1\n---\nb: 2\n", "one YAML document"),
        ("x: " + "a" * 300_000, "larger than"),
    ],
)
def test_it_refuses_unsafe_or_malformed_yaml(text, fragment):
    with pytest.raises(SpecError) as error:
        spec_from_yaml(text)
    assert fragment in error.value.errors["yaml"][0]
