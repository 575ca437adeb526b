"""The fake API server answers the official client as the real one does."""

import json

import pytest
from kubernetes import watch
from kubernetes.client import ApiClient, AuthorizationV1Api, Configuration, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException


@pytest.fixture
def core(fake):
    return CoreV1Api(ApiClient(Configuration(host=fake.url)))


@pytest.fixture
def custom(fake):
    return CustomObjectsApi(ApiClient(Configuration(host=fake.url)))


def _status(error: ApiException) -> dict:
    return json.loads(error.body)


def test_it_assigns_metadata_and_answers_already_exists_as_a_status(core):
    created = core.create_namespace({"metadata": {"name": "maps"}})
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.creation_timestamp

    with pytest.raises(ApiException) as error:
        core.create_namespace({"metadata": {"name": "maps"}})

    assert error.value.status == 409
    assert _status(error.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'namespaces "maps" already exists', "reason": "AlreadyExists",
        "details": {"name": "maps", "group": "", "kind": "namespaces"}, "code": 409,
    }


def test_it_refuses_a_put_with_a_stale_resource_version(core):
    core.create_namespace({"metadata": {"name": "maps"}})
    quota = core.create_namespaced_resource_quota("maps", {"metadata": {"name": "q"}, "spec": {"hard": {}}})
    core.replace_namespaced_resource_quota("q", "maps", {
        "metadata": {"name": "q", "resourceVersion": quota.metadata.resource_version},
        "spec": {"hard": {"pods": "1"}},
    })

    with pytest.raises(ApiException) as error:
        core.replace_namespaced_resource_quota("q", "maps", {
            "metadata": {"name": "q", "resourceVersion": quota.metadata.resource_version},
            "spec": {"hard": {"pods": "2"}},
        })

    assert (error.value.status, _status(error.value)["reason"]) == (409, "Conflict")


def test_it_applies_merge_strategic_and_json_patches(fake, core, custom):
    core.create_namespace({"metadata": {"name": "maps", "labels": {"a": "1", "b": "2"}}})
    core.patch_namespace("maps", {"metadata": {"labels": {"b": None, "c": "3"}}})  # strategic merge
    core.patch_namespace("maps", [{"op": "add", "path": "/metadata/labels/d", "value": "4"}])
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "j"},
        "spec": {"runPolicy": {"suspend": False}},
    })
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", "j",
                                          {"spec": {"runPolicy": {"suspend": True}}})

    assert fake.get("Namespace", "maps")["metadata"]["labels"] == {"a": "1", "c": "3", "d": "4"}
    assert fake.get("TFJob", "j", "maps")["spec"]["runPolicy"] == {"suspend": True}


def test_a_merge_patch_with_a_stale_resource_version_is_a_conflict(core, custom):
    core.create_namespace({"metadata": {"name": "maps"}})
    job = custom.create_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "j"}, "spec": {}})
    stale = job["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", "j",
                                          {"metadata": {"resourceVersion": stale, "labels": {"a": "1"}}})

    with pytest.raises(ApiException) as error:
        custom.patch_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", "j",
                                              {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})

    assert (error.value.status, _status(error.value)["reason"]) == (409, "Conflict")


def test_a_status_is_written_through_its_subresource_only(fake, core, custom):
    core.create_namespace({"metadata": {"name": "maps"}})
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "j"}, "spec": {}})
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}

    custom.patch_namespaced_custom_object("kubeflow.org", "v1", "maps", "tfjobs", "j",
                                          {"status": failed, "spec": {"x": 1}})
    assert "status" not in fake.get("TFJob", "j", "maps")  # even on an object with no status yet
    custom.patch_namespaced_custom_object_status("kubeflow.org", "v1", "maps", "tfjobs", "j",
                                                 {"status": failed, "spec": {"x": 2}})

    assert fake.get("TFJob", "j", "maps")["status"] == failed
    assert fake.get("TFJob", "j", "maps")["spec"] == {"x": 1}  # the subresource writes the status alone


def test_it_lists_by_label_selector_across_namespaces(fake, core):
    for namespace, labels in (("a", {"gangway.io/job-id": "1"}), ("b", {}), ("c", {"gangway.io/job-id": "2"})):
        fake.add({"kind": "Namespace", "metadata": {"name": namespace}})
        fake.add({"kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "labels": labels}})

    def names(selector):
        return [p.metadata.namespace for p in core.list_pod_for_all_namespaces(label_selector=selector).items]

    assert names("gangway.io/job-id") == ["a", "c"]
    assert names("!gangway.io/job-id") == ["b"]
    assert names("gangway.io/job-id=2") == ["c"]
    assert names("gangway.io/job-id!=2") == ["a", "b"]


def test_a_watch_from_a_compacted_version_is_gone(fake, core):
    core.create_namespace({"metadata": {"name": "maps"}})
    old = core.list_namespace().metadata.resource_version
    core.create_namespace({"metadata": {"name": "vision"}})

    events = list(watch.Watch().stream(core.list_namespace, resource_version=old, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "vision")]

    fake.compact()
    with pytest.raises(ApiException) as error:
        list(watch.Watch().stream(core.list_namespace, resource_version=old, timeout_seconds=1))
    assert error.value.status == 410


def test_injected_faults_answer_the_next_matching_requests_then_stop(fake, core):
    fake.fail(500, path="/namespaces$", times=2)

    for _ in range(2):
        with pytest.raises(ApiException) as error:
            core.list_namespace()
        assert (error.value.status, _status(error.value)["reason"]) == (500, "InternalError")
    assert core.list_namespace().items == []


def _pod_with(state: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "maps"},
            "spec": {"containers": [{"name": "pytorch", "image": "busybox"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "pytorch", "state": state}]}}  # fmt: skip


def test_it_serves_a_pods_log_as_text_with_a_bounded_tail(fake, core):
    fake.add(_pod_with({"running": {}}))
    fake.write_log("maps", "p", "".join(f"line {n}\n" for n in range(500)))
    assert core.read_namespaced_pod_log("p", "maps", tail_lines=3) == "line 497\nline 498\nline 499\n"
    assert core.read_namespaced_pod_log("p", "maps", limit_bytes=14) == "line 0\nline 1\n"


def test_a_log_of_a_waiting_container_is_a_bad_request_and_of_a_missing_pod_not_found(fake, core):
    fake.add(_pod_with({"waiting": {"reason": "ImagePullBackOff"}}))
    with pytest.raises(ApiException) as waiting:
        core.read_namespaced_pod_log("p", "maps")
    assert waiting.value.status == 400
    assert 'container "pytorch" in pod "p" is waiting to start: ImagePullBackOff' in _status(waiting.value)["message"]
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod_log("gone", "maps")
    assert missing.value.status == 404


def _pods(fake, *pods: tuple[str, str | None, str]) -> None:
    """Adds a pod of namespace maps per (name, node, phase)."""
    fake.add({"kind": "Namespace", "metadata": {"name": "maps"}})
    for name, node, phase in pods:
        fake.add({"kind": "Pod", "metadata": {"name": name, "namespace": "maps"},
                  "spec": {"nodeName": node, "containers": [{"name": "main"}]},
                  "status": {"phase": phase}})  # fmt: skip


def test_it_selects_pods_by_their_fields_with_each_operator(fake, core):
    _pods(fake, ("running", "n1", "Running"), ("bound", "n1", "Pending"), ("unbound", None, "Pending"),
          ("done", "n2", "Succeeded"), ("failed", "n2", "Failed"))  # fmt: skip

    def names(selector):
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector=selector).items]

    assert names("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed") == ["bound", "running"]
    assert names("status.phase=Pending") == names("status.phase==Pending") == ["bound", "unbound"]
    assert names("spec.nodeName=n2,metadata.name!=done") == ["failed"]
    assert names("spec.hostNetwork=false") == ["bound", "done", "failed", "running", "unbound"]


@pytest.mark.parametrize("list_it, field", [
    (lambda core, custom: core.list_pod_for_all_namespaces(field_selector="spec.containers=main"), "spec.containers"),
    (lambda core, custom: core.list_node(field_selector="status.phase=Ready"), "status.phase"),
    (lambda core, custom: custom.list_cluster_custom_object("kubeflow.org", "v1", "tfjobs",
                                                            field_selector="status.phase=Running"), "status.phase"),
], ids=["a pod field it does not index", "a pod field on nodes",
        "any field but name and namespace on a custom resource"])
def test_it_refuses_a_field_the_resource_cannot_be_selected_on(core, custom, list_it, field):
    with pytest.raises(ApiException) as error:
        list_it(core, custom)

    assert (error.value.status, _status(error.value)["reason"]) == (400, "BadRequest")
    assert _status(error.value)["message"] == f"field label not supported: {field}"


def test_it_serves_a_list_in_pages_all_from_the_snapshot_of_the_first(fake, core):
    _pods(fake, *((f"p{n}", "n1", "Running") for n in range(1, 6)))
    first = core.list_pod_for_all_namespaces(limit=2)
    _pods(fake, ("p0", "n1", "Running"))  # writes between pages
    del fake.objects[("api/v1", "pods", "maps", "p5")]
    second = core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)
    last = core.list_pod_for_all_namespaces(limit=2, _continue=second.metadata._continue)

    pages = [[p.metadata.name for p in page.items] for page in (first, second, last)]
    assert pages == [["p1", "p2"], ["p3", "p4"], ["p5"]]
    assert (first.metadata.remaining_item_count, second.metadata.remaining_item_count) == (3, 1)
    assert first.metadata.resource_version == second.metadata.resource_version == last.metadata.resource_version
    assert last.metadata._continue is None
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces().items] == ["p0", "p1", "p2", "p3", "p4"]


def test_a_page_that_fills_its_limit_leaves_a_token_even_when_no_more_items_match(fake, core):
    _pods(fake, ("a", "n1", "Running"), ("b", "n1", "Running"), ("c", "n1", "Succeeded"))

    first = core.list_pod_for_all_namespaces(limit=2, field_selector="status.phase=Running")
    last = core.list_pod_for_all_namespaces(limit=2, field_selector="status.phase=Running",
                                            _continue=first.metadata._continue)

    assert [p.metadata.name for p in first.items] == ["a", "b"] and first.metadata._continue
    assert first.metadata.remaining_item_count is None  # the real server counts only lists without selectors
    assert (last.items, last.metadata._continue) == ([], None)


def test_a_continue_token_older_than_etcds_history_is_gone_as_the_real_server_says(fake, core):
    _pods(fake, *((f"p{n}", "n1", "Running") for n in range(1, 4)))
    first = core.list_pod_for_all_namespaces(limit=2)
    fake.expire_continue_tokens()

    with pytest.raises(ApiException) as error:
        core.list_pod_for_all_namespaces(limit=2, _continue=first.metadata._continue)

    body = _status(error.value)
    assert error.value.status == 410
    assert {key: body[key] for key in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410}
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list result.")
    rest = core.list_pod_for_all_namespaces(limit=2, _continue=body["metadata"]["continue"])
    assert [p.metadata.name for p in rest.items] == ["p3"]  # the token it answers goes on in the list of now


def test_it_answers_an_access_review_of_a_subresource_as_rbac_would(fake):
    reviews = AuthorizationV1Api(ApiClient(Configuration(host=fake.url)))

    def allowed(resource: str, subresource: str = "", verb: str = "patch", name: str = "") -> bool:
        attributes = {"verb": verb, "group": "kubeflow.org", "resource": resource, "subresource": subresource,
                      "name": name}  # fmt: skip
        return reviews.create_self_subject_access_review({"spec": {"resourceAttributes": attributes}}).status.allowed

    assert allowed("tfjobs", "status")  # no rules given: everything allowed, as every request is
    fake.authorize([
        {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": ["get", "patch"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["*/status"], "verbs": ["get"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/status"], "verbs": ["patch"],
         "resourceNames": ["one"]},
    ])  # fmt: skip

    assert allowed("tfjobs") and not allowed("tfjobs", "status")  # a subresource is granted on its own
    assert allowed("tfjobs", "status", verb="get") and not allowed("tfjobs", verb="delete")
    assert allowed("pytorchjobs", "status", name="one") and not allowed("pytorchjobs", "status")
    assert [review["resource"] for review in fake.access_reviews] == ["tfjobs"] * 5 + ["pytorchjobs"] * 2
