"""The admission policy that keeps jobs from skipping the queue agrees with what Gangway does.

It is validated against the Kubernetes schemas with the other manifests; here its parts are
checked against their counterparts: the namespaces it selects are the ones the tenant sync
labels, the account it lets through is the one the worker runs as, the kinds it covers are
the ones Gangway adopts, and the labels and fields it requires are the ones adoption reads.
"""

from scheduling.cluster import outside
from scheduling.cluster.base import TenantTeam
from scheduling.cluster.kubernetes_outside import POLICY_NAME
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
