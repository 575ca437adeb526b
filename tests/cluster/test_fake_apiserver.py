"""The fake API server answers the official client as the real one does."""

import json

import pytest
from kubernetes import watch
from kubernetes.client import ApiClient, Configuration, CoreV1Api, CustomObjectsApi
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
