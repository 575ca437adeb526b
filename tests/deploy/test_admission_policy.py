"""The admission policy that keeps jobs from skipping the queue agrees with what Gangway does.

It is validated against the Kubernetes schemas with the other manifests; here its parts are
checked against their counterparts: the namespaces it selects are the ones the tenant sync
labels, the account it lets through is the one the worker runs as, the kinds it covers are
the ones Gangway adopts, and the labels and fields it requires are the ones adoption reads.
"""

import hashlib
import json
from pathlib import Path

import yaml

from scheduling.cluster import outside
from scheduling.cluster.base import TenantTeam
from scheduling.cluster.kubernetes_outside import POLICY_FILE, POLICY_NAME, POLICY_VERSION, POLICY_VERSION_ANNOTATION
from scheduling.cluster.manifests import namespace
from tests.deploy.manifests import by_kind, source_objects

OBJECTS = source_objects()
POLICY = by_kind(OBJECTS, "ValidatingAdmissionPolicy")[POLICY_NAME]
BINDING = by_kind(OBJECTS, "ValidatingAdmissionPolicyBinding")[POLICY_NAME]


def test_the_binding_enforces_the_policy_doctor_looks_for():
    assert BINDING["spec"]["policyName"] == POLICY_NAME
    assert BINDING["spec"]["validationActions"] == ["Deny"]
    assert POLICY["spec"]["failurePolicy"] == "Fail"


def test_it_applies_in_exactly_the_namespaces_the_tenant_sync_labels_as_teams():
    [term] = BINDING["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    team_namespace = namespace(TenantTeam(slug="maps", nominal={}, borrowing_limit={}))
    assert term == {"key": term["key"], "operator": "Exists"}
    assert term["key"] in team_namespace["metadata"]["labels"]
    assert "managed-by" not in term["key"]  # not a label every Gangway object carries


def test_it_lets_through_only_the_account_the_worker_runs_as():
    binding = by_kind(OBJECTS, "ClusterRoleBinding")["gangway-scheduler"]
    [subject] = binding["subjects"]
    account = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    [condition] = POLICY["spec"]["matchConditions"]
    assert condition["expression"] == f"request.userInfo.username != '{account}'"
    worker = by_kind(OBJECTS, "Deployment")["gangway-worker"]["spec"]["template"]["spec"]
    assert worker["serviceAccountName"] == subject["name"]


def test_it_covers_every_kind_gangway_adopts_and_trainjob():
    rules = POLICY["spec"]["matchConstraints"]["resourceRules"]
    covered = {(group, resource): set(rule["operations"]) for rule in rules
               for group in rule["apiGroups"] for resource in rule["resources"]}  # fmt: skip
    for kind in outside.outside_kinds():
        assert covered[(kind.group, kind.plural)] == {"CREATE", "UPDATE"}
    assert covered[("trainer.kubeflow.org", "trainjobs")] == {"CREATE", "UPDATE"}
    # kubectl scale changes a PyTorchJob's Workers through its scale subresource; no rule matches /status, where
    # the operators (and Gangway's Failed mark) write.
    assert covered[("kubeflow.org", "pytorchjobs/scale")] == {"UPDATE"}
    assert not [resource for _, resource in covered if resource.endswith("/status") or resource.endswith("/*")]


def test_it_requires_the_queue_label_and_the_suspend_field_adoption_reads():
    expressions = " ".join(v["expression"] for v in POLICY["spec"]["validations"] + POLICY["spec"]["variables"])
    assert f"'{outside.QUEUE_LABEL}' in object.metadata.labels" in expressions
    for kind in outside.outside_kinds():
        path = ".".join(kind.suspend_path)
        assert f"object.{path} == true" in expressions
    assert "object.spec.suspend == true" in expressions  # TrainJob
    assert "request.operation != 'UPDATE' || !variables.wasSuspended || variables.suspended" in expressions


def test_it_is_part_of_the_kustomization():
    kinds = {obj["kind"] for obj in OBJECTS}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds


# Each version's spec, as the sha256 of its JSON (keys sorted): a spec changed without a new version fails
# below, so that doctor never takes an installed policy of the old spec for this one.
SPECS = {"3": "6a234ec256970d82717242cad9f5da67d85d1509669e62f3f089383531558b89"}


def test_it_carries_the_version_doctor_expects_and_a_new_spec_gets_a_new_version():
    assert POLICY["metadata"]["annotations"][POLICY_VERSION_ANNOTATION] == POLICY_VERSION
    digest = hashlib.sha256(json.dumps(POLICY["spec"], sort_keys=True).encode()).hexdigest()
    assert SPECS.get(POLICY_VERSION) == digest, (
        f"The policy's spec changed: raise {POLICY_VERSION_ANNOTATION} in {POLICY_FILE} and POLICY_VERSION in "
        f"scheduling/cluster/kubernetes_outside.py, and add the new version's digest {digest} to SPECS.")


def test_the_file_doctor_tells_to_apply_holds_the_policy():
    objects = yaml.safe_load_all((Path(__file__).resolve().parents[2] / POLICY_FILE).read_text())
    assert by_kind([obj for obj in objects if obj], "ValidatingAdmissionPolicy")[POLICY_NAME] == POLICY
