"""One registry of job kinds: a kind registered there is offered, checked, imported, built and stored everywhere.

The kind here, MPIJob, is one Gangway does not ship: registering it in a test
must be enough for every consumer to take it, with no other code.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from jobs import kinds
from jobs.form_spec import validate
from jobs.forms import JobForm, bind, replica_formset
from jobs.models import Job
from jobs.serializers import JobSpecSerializer
from jobs.spec import SpecError, parse_spec
from jobs.yaml_import import spec_from_yaml
from scheduling.cluster import job_manifests
from scheduling.cluster.base import ClusterJob, ReplicaSpec
from scheduling.cluster.kubernetes_tenants import required_crds

MANIFEST = """
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {name: allreduce, namespace: maps}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers: [{name: mpi, image: mpioperator/mpi-pi, command: [mpirun, pi]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: mpi
              image: mpioperator/mpi-pi
              resources: {limits: {nvidia.com/gpu: 1}}
"""


def spec(**overrides) -> dict:
    return {"team": "maps", "name": "allreduce", "kind": "MPIJob", "image": "mpioperator/mpi-pi",
            "replicas": [{"role": "Launcher", "count": 1}, {"role": "Worker", "count": 2, "gpu": 1}], **overrides}


def test_the_registry_imports_only_the_standard_library():
    tree = ast.parse(Path(kinds.__file__).read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert {name.split(".")[0] for name in modules} <= set(sys.stdlib_module_names) | {"__future__"}


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(kinds.get("TFJob"))


def test_the_spec_takes_a_registered_kind_with_its_roles(mpijob):
    parsed = parse_spec(spec())
    assert (parsed.kind, [g.role for g in parsed.replicas]) == ("MPIJob", ["Launcher", "Worker"])
    with pytest.raises(SpecError) as refused:
        parse_spec(spec(replicas=[{"role": "Launcher", "count": 2}, {"role": "Chief"}]))
    assert refused.value.errors["replicas[0].count"] == ["A MPIJob has exactly one Launcher, got 2."]
    assert refused.value.errors["replicas[1].role"] == ["A MPIJob role is one of Launcher, Worker, got 'Chief'."]


def test_the_spec_refuses_a_kind_nobody_registered():
    with pytest.raises(SpecError) as refused:
        parse_spec(spec())
    assert refused.value.errors["kind"] == ["Must be one of TFJob, PyTorchJob, TrainJob, got 'MPIJob'."]


def test_the_form_offers_its_kind_and_roles(mpijob):
    form = JobForm(teams=[])
    assert ("MPIJob", "MPIJob") in list(form.fields["kind"].choices)
    assert "MPIJob Launcher, Worker" in form.fields["kind"].help_text
    row = replica_formset().empty_form
    assert ("Launcher", "Launcher") in list(row.fields["role"].choices)


def test_the_form_validates_a_job_of_that_kind(maps, mpijob):
    data = {"team": "maps", "kind": "MPIJob", "name": "allreduce", "image": "mpioperator/mpi-pi",
            "replicas-TOTAL_FORMS": "2", "replicas-INITIAL_FORMS": "0",
            "replicas-0-role": "Launcher", "replicas-0-count": "1", "replicas-0-gpu": "0",
            "replicas-1-role": "Worker", "replicas-1-count": "2", "replicas-1-gpu": "1"}  # fmt: skip
    form, formset = bind(data, teams=[maps])
    parsed = validate(form, formset)
    assert parsed is not None, (form.errors, [f.errors for f in formset.forms])
    assert parsed.kind == "MPIJob"


def test_the_serializer_validates_its_kind_and_roles(mpijob):
    assert JobSpecSerializer(data=spec()).is_valid()


def test_the_serializer_refuses_it_once_unregistered():
    serializer = JobSpecSerializer(data=spec())
    assert not serializer.is_valid()
    assert "kind" in serializer.errors


def test_yaml_import_reads_its_manifest_and_lists_what_it_drops(mpijob):
    data, unsupported = spec_from_yaml(MANIFEST)
    parsed = parse_spec(data)
    assert (parsed.kind, parsed.team, [(g.role, g.count, g.gpu) for g in parsed.replicas]) == (
        "MPIJob", "maps", [("Launcher", 1, 0), ("Worker", 2, 1)])
    # One command serves every replica of a kind built by the generic layout: the Workers get the Launcher's.
    assert unsupported == ["spec.slotsPerWorker", "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command "
                           "(not set; Launcher's serves every replica)"]


def test_yaml_import_refuses_another_api_version_of_a_kind(mpijob):
    with pytest.raises(SpecError) as refused:
        spec_from_yaml(MANIFEST.replace("kubeflow.org/v1", "kubeflow.org/v2beta1"))
    assert refused.value.errors == {"apiVersion": ["A MPIJob is kubeflow.org/v1, got 'kubeflow.org/v2beta1'."]}


def test_the_manifest_builder_builds_it_as_its_layout_is_shaped(mpijob):
    job = ClusterJob(
        job_id=7, name="allreduce-g7", namespace="maps", team="maps", kind="MPIJob", image="mpioperator/mpi-pi",
        command=(), args=(), env=(), tier="standard", grace_period=30, max_runtime=None,
        replicas=(ReplicaSpec("Launcher", 1, 0, 1000, 2**30), ReplicaSpec("Worker", 2, 1, 1000, 2**30)),
    )  # fmt: skip
    manifest = job_manifests.job_manifest(job)
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "MPIJob")
    groups = manifest["spec"]["mpiReplicaSpecs"]
    assert list(groups) == ["Launcher", "Worker"]
    assert groups["Worker"]["template"]["spec"]["containers"][0]["name"] == "mpi"
    assert manifest["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    assert job_manifests.replica_needs(manifest)[1][:2] == ("Worker", 2)
    assert job_manifests.suspend_patch(mpijob) == {"metadata": {"annotations": {"gangway.io/suspended-by": "gangway"}},
                                                   "spec": {"runPolicy": {"suspend": True}}}  # fmt: skip


def test_the_job_model_stores_it_without_a_migration(maps, tiers, mpijob):
    job = Job(team=maps, name="allreduce", kind="MPIJob", image="mpioperator/mpi-pi", replicas=[{"role": "Worker", "count": 1}],
              tier=tiers["standard"], queued_at="2026-01-01T00:00:00Z")  # fmt: skip
    job.full_clean(exclude=["owner"])
    job.save()
    assert Job.objects.get(pk=job.pk).kind == "MPIJob"


def test_the_job_model_refuses_a_kind_nobody_registered(maps, tiers):
    job = Job(team=maps, name="allreduce", kind="MPIJob", image="x", replicas=[{"role": "Worker", "count": 1}], tier=tiers["standard"],
              queued_at="2026-01-01T00:00:00Z")  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        job.full_clean(exclude=["owner"])
    assert list(refused.value.message_dict) == ["kind"]


def test_doctor_asks_for_its_crd(mpijob):
    assert required_crds()["mpijobs.kubeflow.org"] == "the Kubeflow MPI Operator"
    assert required_crds()["tfjobs.kubeflow.org"] == "the Kubeflow Training Operator"
