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


@pytest.mark.django_db  # its nodeSelector is read against the cluster's GPU types (it has none)
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


@pytest.mark.django_db
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


KINDS_IT_TAKES = ("it takes a kubeflow.org/v1 TFJob, kubeflow.org/v1 PyTorchJob or trainer.kubeflow.org/v1alpha1 "
                  "TrainJob manifest, or a Gangway job spec.")


@pytest.mark.parametrize(
    "text, got",
    [
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", "An apps/v1 Deployment is not a job kind"),
        ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: web}\n", "A batch/v1 Job is not a job kind"),
        ("apiVersion: v1\nmetadata: {name: web}\n", "A v1 manifest without a kind is not a job"),
    ],
    ids=["a Deployment", "a batch Job", "no kind"],
)
def test_a_manifest_of_a_kind_gangway_does_not_run_is_refused_naming_it_and_the_kinds_it_takes(text, got):
    with pytest.raises(SpecError) as error:
        spec_from_yaml(text)
    assert error.value.errors == {"yaml": [f"{got} Gangway runs; {KINDS_IT_TAKES}"]}


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


PYTORCHJOB_WITH_VOLUMES = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bert, namespace: maps}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime
              resources: {limits: {nvidia.com/gpu: 1, memory: 24Gi}}
              volumeMounts:
                - {name: data, mountPath: /data, readOnly: true}
                - {name: config, mountPath: /etc/train}
                - {name: dshm, mountPath: /dev/shm}
                - {name: host, mountPath: /host}
                - {name: token, mountPath: /var/run/token}
          volumes:
            - {name: data, persistentVolumeClaim: {claimName: datasets}}
            - {name: config, configMap: {name: train-config}}
            - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}
            - {name: host, hostPath: {path: /var/lib}}
            - {name: token, secret: {secretName: other-team-token}}
"""


def test_a_manifests_claims_config_maps_and_shm_become_the_specs():
    data, unsupported = spec_from_yaml(PYTORCHJOB_WITH_VOLUMES)
    assert data["volumes"] == [
        {"claim": "datasets", "path": "/data", "read_only": True},
        {"config_map": "train-config", "path": "/etc/train"},
    ]
    assert data["shm"] == "8Gi"
    # The pod's 24Gi covered the 8Gi shm; the spec asks for the rest, and Gangway adds the shm back.
    assert data["replicas"][0]["memory"] == "16Gi"
    spec = parse_spec(data)
    assert spec.shm == 8 * 1024**3 and len(spec.volumes) == 2


def test_host_paths_and_secrets_are_listed_back_never_mounted():
    data, unsupported = spec_from_yaml(PYTORCHJOB_WITH_VOLUMES)
    where = "spec.pytorchReplicaSpecs.Worker.template.spec.volumes"
    assert any(item.startswith(f"{where}[3] (hostPath") for item in unsupported), unsupported
    assert any(item.startswith(f"{where}[4] (secret") for item in unsupported), unsupported
    assert all(volume.get("path") not in ("/host", "/var/run/token") for volume in data["volumes"])


def test_a_disk_backed_empty_dir_and_an_unmounted_volume_are_listed():
    text = PYTORCHJOB_WITH_VOLUMES.replace("{medium: Memory, sizeLimit: 8Gi}", "{}").replace(
        "- {name: data, mountPath: /data, readOnly: true}", "- {name: config, mountPath: /etc/other}"
    )
    data, unsupported = spec_from_yaml(text)
    assert "shm" not in data
    assert any("memory-backed emptyDir" in item for item in unsupported)
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0] (not mounted)" in unsupported


TFJOB_WITH_A_PS = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist-dist}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0
              env: [{name: ROLE_THREADS, value: "2"}]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              command: [python, /app/mnist.py]
              env: [{name: ROLE_THREADS, value: "8"}]
              resources: {limits: {nvidia.com/gpu: 2}}
"""


def test_a_replica_types_own_image_or_env_value_is_listed_back_never_dropped_silently():
    data, unsupported = spec_from_yaml(TFJOB_WITH_A_PS)
    worker = "spec.tfReplicaSpecs.Worker.template.spec.containers[0]"
    # One image and one env serve every replica group: the first replica type's are kept ...
    assert (data["image"], data["env"]) == ("tensorflow/tensorflow:2.12.0", {"ROLE_THREADS": "2"})
    # ... and the Worker's own are named in the list of what was not carried over.
    assert f"{worker}.image (differs from PS's; one image serves every replica)" in unsupported, unsupported
    assert f"{worker}.env.ROLE_THREADS (differs from PS's; one value serves every replica)" in unsupported
    # A value only one replica type sets is carried over, and the type that sets none is named: it runs it too.
    assert data["command"] == ["python", "/app/mnist.py"]
    assert [item for item in unsupported if ".command" in item] == [
        "spec.tfReplicaSpecs.PS.template.spec.containers[0].command (not set; Worker's serves every replica)"]


def test_a_replica_type_setting_no_args_or_env_variable_another_sets_is_named():
    data, unsupported = spec_from_yaml(TFJOB_WITH_A_PS.replace(
        "env: [{name: ROLE_THREADS, value: \"2\"}]", "args: [--steps, \"1000\"]"))
    assert (data["args"], data["env"]) == (["--steps", "1000"], {"ROLE_THREADS": "8"})
    ps, worker = (f"spec.tfReplicaSpecs.{role}.template.spec.containers[0]" for role in ("PS", "Worker"))
    assert f"{worker}.args (not set; PS's serves every replica)" in unsupported, unsupported
    assert f"{ps}.env.ROLE_THREADS (not set; Worker's value serves every replica)" in unsupported, unsupported
