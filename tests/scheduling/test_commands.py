"""Operator commands: cycle, manifest, doctor, submit, seed_demo."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import CommandError, call_command

from jobs.models import Job
from scheduling.models import SimNode
from tenants.models import Membership, PriorityTier, Quota, Team


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_cycle_prints_a_summary_line(submit, nodes):
    submit()
    assert "Admitted 1, preempted 0, rejected 0, waiting 0." in run("cycle")


def test_manifest_prints_the_tfjob_the_adapter_would_create(submit):
    job = submit(replicas=[{"role": "Worker", "count": 4, "gpu": 1}])
    manifest = yaml.safe_load(run("manifest", str(job.pk)))
    assert manifest["kind"] == "TFJob" and manifest["metadata"]["namespace"] == "maps"
    assert manifest["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 4
    worker = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["schedulerName"] == "volcano" and worker["priorityClassName"] == "standard"


def test_manifest_of_a_missing_job_is_a_clear_error(db):
    with pytest.raises(CommandError, match="No job with id 999"):
        run("manifest", "999")


def test_doctor_passes_on_a_seeded_simulated_cluster(maps, nodes):
    assert "All checks passed." in run("doctor")


def test_doctor_says_whether_the_planning_code_runs_compiled_and_why(maps, nodes):
    from scheduling.policy import native

    assert native.REASON.startswith(("compiled with mypyc: ", "interpreted: "))
    assert f"Gangway's planning code: {native.REASON}.\n" in run("doctor")


def test_doctor_reports_quotas_above_capacity_and_exits_1(maps, vision):
    SimNode.objects.create(name="small", gpu=4)
    with pytest.raises(SystemExit) as exit_:
        out = io.StringIO()
        call_command("doctor", stdout=out)
    assert exit_.value.code == 1


def test_submit_reads_a_tfjob_manifest(maps, owner, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: mnist}\nspec:\n  tfReplicaSpecs:\n"
        "    Worker:\n      replicas: 2\n      template:\n        spec:\n          containers:\n"
        "          - {name: tensorflow, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    out = run("submit", "--team", "maps", "--file", str(path), "--user", "owner")
    job = Job.objects.get()
    assert f"Submitted job mnist (#{job.pk}) to team maps: queued." in out
    assert job.gpu_total == 2 and job.owner == owner


def test_submit_refuses_a_bad_spec_naming_the_field(maps, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: Bad_Name\nimage: busybox\nreplicas: [{role: Worker}]\n")
    with pytest.raises(CommandError, match="name: Must be at most"):
        run("submit", "--team", "maps", "--file", str(path))
    assert not Job.objects.exists()


def snapshot_of_rows() -> list:
    return [
        sorted(Team.objects.values_list("slug", "name", "weight")),
        sorted(Quota.objects.values_list("team__slug", "resource", "nominal", "borrowing_limit")),
        sorted(PriorityTier.objects.values_list("name", "value", "preemptible")),
        sorted(Membership.objects.values_list("user__username", "team__slug", "role")),
        sorted(Job.objects.values_list("name", "state", "idempotency_key")),
        sorted(SimNode.objects.values_list("name", "gpu")),
    ]


def test_seed_demo_twice_gives_the_same_rows(db):
    first = run("seed_demo")
    rows = snapshot_of_rows()
    second = run("seed_demo")
    assert snapshot_of_rows() == rows
    assert "(0 rows created)" in second and "(0 rows created)" not in first
    assert sum(nominal for _, resource, nominal, _ in rows[1] if resource == "gpu:l4") == 32, "quotas sum to the 4 x 8 l4 GPUs"
    assert sum(nominal for _, resource, nominal, _ in rows[1] if resource == "gpu:a100") == 16, "and to the 2 x 8 a100 GPUs"


def test_seed_demo_scales_quotas_with_the_cluster(db):
    run("seed_demo", "--nodes", "8", "--a100-nodes", "3", "--gpus-per-node", "4")
    assert SimNode.objects.count() == 11
    assert sum(Quota.objects.filter(resource="gpu:l4").values_list("nominal", flat=True)) == 32
    assert sum(Quota.objects.filter(resource="gpu:a100").values_list("nominal", flat=True)) == 12


def test_doctor_lists_each_teams_claims(maps, vision, nodes):
    from scheduling.models import SimClaim

    SimClaim.objects.create(namespace="maps", name="datasets", capacity=2 * 1024**4)
    out = run("doctor")
    assert "Claims of team maps: datasets (2 TiB, ReadWriteMany, Bound)." in out
    assert "Team vision has no PersistentVolumeClaims in namespace vision; its jobs can mount none." in out


def test_seed_demo_gives_every_team_a_datasets_claim(db):
    from scheduling.models import SimClaim

    run("seed_demo")
    teams = set(Team.objects.values_list("slug", flat=True))
    assert set(SimClaim.objects.filter(name="datasets").values_list("namespace", flat=True)) == teams


def test_simulate_outside_creates_a_kubectl_job_and_a_sweep_that_reconcile_adopts(maps, nodes):
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.loop import admission_cycle
    from scheduling.reconcile import reconcile

    out = run("simulate_outside", "--team", "maps", "--experiment", "tune", "--trials", "5", "--trial-gpus", "4")
    assert "Created 1 kubectl job and 5 trials of experiment tune in namespace maps" in out
    assert "Created 0 kubectl job and 0 trials" in run("simulate_outside", "--team", "maps", "--experiment", "tune",
                                                       "--trials", "5")  # fmt: skip
    cluster = SimulatedCluster(failure_rate=0)
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    trials = Job.objects.filter(sweep__experiment="tune")
    assert trials.count() == 5
    assert sum(job.gpu_total for job in trials if job.state == Job.State.ADMITTED) <= maps.sweep_gpu_cap
    assert Job.objects.get(sweep=None).submitted_via == "kubectl-create (alice)"

    assert "Deleted maps/bert-pretrain" in run("simulate_outside", "--team", "maps", "--delete", "bert-pretrain")
    reconcile(cluster=cluster)
    assert Job.objects.get(sweep=None).state == Job.State.CANCELLED


def test_simulate_outside_refuses_an_unknown_team(db):
    with pytest.raises(CommandError, match="No team 'nope'"):
        run("simulate_outside", "--team", "nope")


def test_simulate_outside_has_help():
    from scheduling.management.commands.simulate_outside import Command

    assert "Katib-style experiment of N trials" in Command.help


def test_doctor_passes_with_notes_and_fails_on_a_problem(db, monkeypatch):
    from scheduling.cluster.base import Finding
    from scheduling.cluster.simulated import SimulatedCluster

    note = Finding("TrainJob jobs cannot run on this cluster.", "Install Kubeflow Trainer v2.", blocking=False)
    monkeypatch.setattr(SimulatedCluster, "doctor", lambda self, tenants: [note])
    out = run("doctor")
    assert "- Note: TrainJob jobs cannot run on this cluster. Fix: Install Kubeflow Trainer v2." in out
    assert out.rstrip().endswith("All checks passed, with 1 note(s).")
    problem = Finding("No GPUs.", "Install the device plugin.")
    monkeypatch.setattr(SimulatedCluster, "doctor", lambda self, tenants: [note, problem])
    with pytest.raises(SystemExit) as stopped:
        run("doctor")
    assert stopped.value.code == 1


def test_doctor_without_a_cluster_configuration_says_so_instead_of_a_traceback(db, settings, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    settings.CLUSTER_BACKEND = "kubernetes"
    out = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("doctor", stdout=out)
    assert stopped.value.code == 1
    assert out.getvalue().startswith("The cluster could not be reached: No Kubernetes configuration")


def test_doctor_names_a_check_the_cluster_refused(db, monkeypatch):
    from scheduling.cluster.base import ClusterError
    from scheduling.cluster.simulated import SimulatedCluster

    def refused(self, tenants):
        raise ClusterError("list Node *: 403 Forbidden: nodes is forbidden")

    monkeypatch.setattr(SimulatedCluster, "doctor", refused)
    out = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("doctor", stdout=out)
    assert stopped.value.code == 1
    assert "The cluster refused a check: list Node *: 403 Forbidden" in out.getvalue()


def test_sync_tenants_prints_what_it_changed_and_fails_naming_what_was_refused(db, monkeypatch):
    from scheduling.cluster.base import SyncIncomplete
    from scheduling.cluster.simulated import SimulatedCluster

    def partly(self, tenants):
        raise SyncIncomplete(["Created Namespace vision."], ["create ResourceQuota maps/gangway-quota: 403 Forbidden"])

    monkeypatch.setattr(SimulatedCluster, "sync_tenants", partly)
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"1 object\(s\) are not in line; every other one is:\n- create ResourceQuota maps"):
        call_command("sync_tenants", stdout=out)
    assert out.getvalue() == "- Created Namespace vision.\n1 change(s).\n"
