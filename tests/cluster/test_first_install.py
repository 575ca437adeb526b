"""An admin's first install against a cluster, command by command, as the README tells it.

The commands run with CLUSTER_BACKEND=kubernetes and a KUBECONFIG naming the fake API server:
doctor on a cluster with a CPU-only node, an admission policy with or without its binding, and
deploy/kubernetes's ClusterRole with or without the grant that lets Gangway mark a job from elsewhere Failed,
sync_tenants and cycle when the configuration is missing, the server is down or a read is refused,
and the demo's commands, which belong to the simulated cluster only.
"""

from __future__ import annotations

import copy
import io

import pytest
from django.core.management import CommandError, call_command

from jobs import kinds
from scheduling.cluster.base import TenantTeam, Tenants
from tests.cluster.test_kubernetes_adapter import TENANTS, _healthy, _node
from tests.deploy.manifests import by_kind, source_objects

FORBIDDEN = 'pods is forbidden: User "system:serviceaccount:gangway:gangway-scheduler" cannot list resource "pods"'


def _kubeconfig(path, server: str) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server}\n"
        "users:\n- name: me\n  user:\n    token: not-a-secret\n"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: me\n"
    )
    return str(path)


@pytest.fixture
def on_kubernetes(settings, monkeypatch, tmp_path):
    """The Kubernetes backend outside a cluster: KUBECONFIG (set by each test) and no ~/.kube/config."""
    settings.CLUSTER_BACKEND = "kubernetes"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    return monkeypatch


@pytest.fixture
def pointed_at(on_kubernetes, fake, tmp_path):
    """KUBECONFIG names the fake API server."""
    on_kubernetes.setenv("KUBECONFIG", _kubeconfig(tmp_path / "config", fake.url))
    return fake


@pytest.fixture
def unreachable(on_kubernetes, tmp_path):
    """KUBECONFIG names a port nothing listens on."""
    on_kubernetes.setenv("KUBECONFIG", _kubeconfig(tmp_path / "config", "http://127.0.0.1:1"))


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


# -- doctor ------------------------------------------------------------------------------------

def test_a_cpu_only_node_beside_the_gpu_nodes_is_a_note_not_a_problem(fake, cluster):
    _healthy(fake)
    fake.add(_node("system-1", gpu=None))  # where Volcano, Gangway and the rest of the platform run

    [finding] = cluster.doctor(TENANTS)

    assert finding.problem == "1 of 3 schedulable nodes report no nvidia.com/gpu: system-1."
    assert not finding.blocking


def test_doctor_before_the_tenant_sync_says_which_teams_have_no_namespace_yet(fake, cluster):
    _healthy(fake)  # maps and vision are synced; speech was added since
    tenants = Tenants(teams=(*TENANTS.teams, TenantTeam(slug="speech", nominal={"gpu": 0}, borrowing_limit={})), tiers=TENANTS.tiers)

    [finding] = cluster.doctor(tenants)

    assert finding.problem == ("Team speech has no namespace speech yet, so its jobs cannot be created "
                               "until the tenant sync makes it.")
    assert finding.fix.startswith("Run manage.py sync_tenants")
    assert not finding.blocking  # the README's order: doctor first, then sync_tenants


def test_doctor_passes_on_a_cluster_with_a_cpu_only_node(db, pointed_at):
    _healthy(pointed_at)
    pointed_at.add(_node("system-1", gpu=None))

    out = _run("doctor")

    assert "- Note: 1 of 3 schedulable nodes report no nvidia.com/gpu: system-1." in out
    assert out.rstrip().endswith("All checks passed, with 1 note(s).")


def test_a_cluster_without_any_gpu_still_fails_doctor(fake, cluster):
    _healthy(fake)
    for name in ("n1", "n2"):
        fake.add(_node(name, gpu=None))

    findings = cluster.doctor(TENANTS)

    assert [f.blocking for f in findings if "nvidia.com/gpu" in f.problem] == [True]
    assert "No schedulable node reports nvidia.com/gpu, so no GPU job can ever start." in [f.problem for f in findings]


def test_an_admission_policy_without_its_binding_is_a_problem(fake, cluster):
    _healthy(fake)
    fake.objects = {key: obj for key, obj in fake.objects.items() if obj["kind"] != "ValidatingAdmissionPolicyBinding"}

    [finding] = cluster.doctor(TENANTS)

    assert finding.problem.startswith("The ValidatingAdmissionPolicyBinding gangway-queue-required is not installed")
    assert finding.blocking and "kubectl apply -k deploy/kubernetes" in finding.fix


def _install_policy(fake, policy: dict) -> None:
    """Installs `policy` in the place of the one there, as the API server keeps it: its spec as applied."""
    fake.add({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": policy["metadata"], "spec": policy["spec"]})  # fmt: skip


SHIPPED = by_kind(source_objects(), "ValidatingAdmissionPolicy")["gangway-queue-required"]


def _older_policy() -> dict:
    """The policy as version 1 shipped it: no annotation, no rule on pytorchjobs/scale nor on a running job."""
    spec = copy.deepcopy(SHIPPED["spec"])
    spec["matchConstraints"]["resourceRules"] = [rule for rule in spec["matchConstraints"]["resourceRules"]
                                                 if rule["resources"] != ["pytorchjobs/scale"]]  # fmt: skip
    spec["validations"] = spec["validations"][:3]
    return {"metadata": {"name": "gangway-queue-required"}, "spec": spec}


def test_the_policy_deploy_ships_passes_doctor(fake, cluster):
    _healthy(fake)
    _install_policy(fake, SHIPPED)

    assert cluster.doctor(TENANTS) == []


def test_an_older_policy_is_a_problem_saying_which_is_installed_and_how_to_update_it(fake, cluster):
    _healthy(fake)
    _install_policy(fake, _older_policy())

    [finding] = cluster.doctor(TENANTS)

    assert finding.problem.startswith("The ValidatingAdmissionPolicy gangway-queue-required installed is an earlier "
                                      "version, without the annotation gangway.io/policy-version, not the version 3 "
                                      "this Gangway ships")  # fmt: skip
    assert "kubectl scale" in finding.problem and finding.blocking
    assert "kubectl apply -f deploy/kubernetes/admission-policy.yaml" in finding.fix


def test_a_policy_of_a_later_gangway_is_a_problem_naming_both_versions(fake, cluster):
    _healthy(fake)
    later = copy.deepcopy(SHIPPED)
    later["metadata"]["annotations"]["gangway.io/policy-version"] = "4"
    _install_policy(fake, later)

    [finding] = cluster.doctor(TENANTS)

    assert ("installed is version 4 (gangway.io/policy-version), newer than the version 3 this Gangway ships"
            in finding.problem)  # fmt: skip
    assert "kubectl apply -f deploy/kubernetes/admission-policy.yaml" in finding.fix
    assert "upgrade Gangway to the release that ships version 4" in finding.fix


def test_no_policy_is_a_problem_and_no_version_is_told(fake, cluster):
    _healthy(fake)
    fake.objects = {key: obj for key, obj in fake.objects.items() if obj["kind"] != "ValidatingAdmissionPolicy"}

    [finding] = cluster.doctor(TENANTS)

    assert finding.problem.startswith("The ValidatingAdmissionPolicy gangway-queue-required is not installed")


def test_doctor_with_an_older_policy_exits_1_naming_it(db, pointed_at):
    _healthy(pointed_at)
    _install_policy(pointed_at, _older_policy())
    out = io.StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("doctor", stdout=out, stderr=io.StringIO())

    assert exited.value.code == 1
    assert "- The ValidatingAdmissionPolicy gangway-queue-required installed is an earlier version" in out.getvalue()
    assert out.getvalue().rstrip().endswith("1 problem(s) found.")


def test_a_binding_that_only_warns_is_a_problem(fake, cluster):
    _healthy(fake)
    binding = fake.get("ValidatingAdmissionPolicyBinding", "gangway-queue-required")
    binding["spec"]["validationActions"] = ["Warn", "Audit"]
    fake.add(binding)

    [finding] = cluster.doctor(TENANTS)

    assert "does not deny" in finding.problem and "validationActions" in finding.problem


def test_a_job_that_skipped_the_queue_is_not_told_to_install_a_policy_that_is_installed(fake, cluster):
    _healthy(fake)
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "maps"}})
    fake.add({"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
              "metadata": {"name": "early", "namespace": "maps", "labels": {"gangway.io/queue": "maps"}},
              "spec": {"runPolicy": {"suspend": False}, "tfReplicaSpecs": {}}})  # fmt: skip
    tenants = Tenants(teams=(*TENANTS.teams, TenantTeam(slug="maps", nominal={}, borrowing_limit={})), tiers=())

    [finding] = cluster.doctor(tenants)

    assert "TFJob maps/early runs in team namespace maps outside Gangway's queue" in finding.problem
    assert "install the admission policy" not in finding.fix


def _rules(*, without: str = "") -> list[dict]:
    """The rules of deploy/kubernetes's ClusterRole gangway-scheduler, `without` that resource in any of them."""
    rules = by_kind(source_objects(), "ClusterRole")["gangway-scheduler"]["rules"]
    return [{**rule, "resources": [r for r in rule["resources"] if r != without]} for rule in rules]


def test_doctor_passes_when_the_cluster_role_lets_gangway_mark_jobs_from_elsewhere_failed(db, pointed_at):
    _healthy(pointed_at)
    pointed_at.authorize(_rules())

    out = _run("doctor")

    assert "may not patch" not in out
    assert out.rstrip().endswith("All checks passed.")
    assert pointed_at.access_reviews == [
        {"verb": "patch", "group": "kubeflow.org", "resource": "tfjobs", "subresource": "status"},
        {"verb": "patch", "group": "kubeflow.org", "resource": "pytorchjobs", "subresource": "status"},
    ]


def test_doctor_names_the_kind_whose_status_gangway_may_not_patch_and_what_that_breaks(db, pointed_at):
    _healthy(pointed_at)
    pointed_at.authorize(_rules(without="pytorchjobs/status"))

    lines = _run("doctor").splitlines()  # a note: no SystemExit, so exit status 0

    assert [line for line in lines if line.startswith("- ")] == [
        "- Note: Gangway may not patch pytorchjobs/status: a PyTorchJob from elsewhere that Gangway refuses, or "
        "that a person cancels in Gangway, is not marked Failed, so its Katib trial holds its place in the "
        "experiment and its Pipelines step waits for ever (each reconcile pass logs the refused mark). "
        "Fix: Grant patch on pytorchjobs/status in the API group kubeflow.org to Gangway's service account, "
        "as deploy/kubernetes/rbac.yaml does (kubectl apply -k deploy/kubernetes).",
    ]  # fmt: skip
    assert lines[-1] == "All checks passed, with 1 note(s)."


def test_a_trainjobs_status_is_not_asked_about_since_gangway_never_writes_it(fake, cluster):
    _healthy(fake)
    fake.authorize(_rules(without="tfjobs/status"))  # the ClusterRole grants nothing on trainjobs/status either

    [finding] = cluster.doctor(TENANTS)

    assert not kinds.get("TrainJob").keeps_written_failure
    assert finding.problem.startswith("Gangway may not patch tfjobs/status: a TFJob from elsewhere")
    assert not finding.blocking
    assert [review["resource"] for review in fake.access_reviews] == ["tfjobs", "pytorchjobs"]


def test_a_refused_access_review_is_a_note_and_every_other_check_still_counts(fake, cluster):
    """The question itself refused (an account without the grant on a cluster that does not bind
    system:basic-user): doctor notes it for each kind, and goes on."""
    _healthy(fake)
    fake.fail(403, path=".*selfsubjectaccessreviews.*", method="POST", times=10,
              message="selfsubjectaccessreviews.authorization.k8s.io is forbidden")

    findings = cluster.doctor(TENANTS)

    assert [f.problem.split(" (")[0] for f in findings] == [
        "Gangway could not ask whether it may patch tfjobs/status",
        "Gangway could not ask whether it may patch pytorchjobs/status",
    ]
    assert "forbidden" in findings[0].problem
    assert not any(f.blocking for f in findings)
    assert "create on selfsubjectaccessreviews" in findings[0].fix


# -- sync_tenants and cycle when the cluster cannot be used -------------------------------------

def test_sync_tenants_without_a_cluster_configuration_says_so_instead_of_a_traceback(maps, on_kubernetes):
    with pytest.raises(CommandError, match="^The cluster could not be reached: No Kubernetes configuration.*KUBECONFIG"):
        _run("sync_tenants")


def test_sync_tenants_against_a_server_that_is_down_says_so_instead_of_a_traceback(maps, unreachable, settings):
    with pytest.raises(CommandError, match="^The cluster could not be reached: .*cannot reach the API server"):
        _run("sync_tenants")


def test_cycle_without_a_cluster_configuration_says_so_instead_of_a_traceback(maps, on_kubernetes):
    with pytest.raises(CommandError, match="^The cluster could not be reached: No Kubernetes configuration"):
        _run("cycle")


def test_cycle_whose_reconcile_read_is_refused_names_the_refusal_and_still_runs_the_admission_cycle(maps, pointed_at):
    pointed_at.add(_node("n1"))
    pointed_at.fail(403, path="/pods$", times=10, message=FORBIDDEN)
    out = io.StringIO()

    with pytest.raises(SystemExit) as stopped:
        call_command("cycle", stdout=out, stderr=io.StringIO())

    assert stopped.value.code == 1
    first, *rest = out.getvalue().splitlines()
    assert first == (f"The cluster refused the reconcile: list Pod *: 403 Forbidden: {FORBIDDEN}. "
                     "Check the RBAC rules of Gangway's service account (deploy/kubernetes/rbac.yaml).")  # fmt: skip
    # A refusal, not an outage: the cycle says so, and where to look, as the reconcile does.
    assert rest[-1].startswith("The cluster refused the cycle's read: list Pod *: 403 Forbidden")
    assert rest[-1].endswith("; jobs stay queued. Check the RBAC rules of Gangway's service account "
                             "(deploy/kubernetes/rbac.yaml).") and "unreachable" not in rest[-1]  # fmt: skip


# -- the demo's commands --------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["seed_demo"], ["simulate_outside", "--team", "maps"]])
def test_the_demos_commands_refuse_to_run_on_the_kubernetes_backend(maps, on_kubernetes, command):
    from django.contrib.auth import get_user_model

    from scheduling.models import SimNode, SimOutsideJob

    with pytest.raises(CommandError, match="simulated cluster only.*CLUSTER_BACKEND is kubernetes"):
        _run(*command)

    assert not get_user_model().objects.exists() and not SimNode.objects.exists()
    assert not SimOutsideJob.objects.exists()


def test_a_kind_whose_operator_is_not_installed_is_not_asked_about(fake, cluster):
    """Without the Training Operator the cluster has no TFJob to mark Failed: its status grant is moot (the
    tenants' checks say to install the operator)."""
    _healthy(fake)
    fake.authorize(_rules(without="tfjobs/status"))
    fake.fail(404, method="GET", path="^/apis/kubeflow.org/v1/tfjobs$", times=10,
              message="the server could not find the requested resource")

    findings = cluster.doctor(TENANTS)

    assert not any("tfjobs/status" in finding.problem for finding in findings)
    assert [review["resource"] for review in fake.access_reviews] == ["pytorchjobs"]
