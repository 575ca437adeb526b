"""The submit page's YAML import: the form filled with what the API would take from the same manifest,
submitted as a browser posts it back."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.page_forms import form_fields, opened

pytestmark = pytest.mark.django_db

TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist, namespace: maps}
spec:
  runPolicy: {activeDeadlineSeconds: 3600}
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.12.0-gpu
              command: [python, train.py]
              resources: {limits: {nvidia.com/gpu: 1, memory: 4Gi}}
"""


def tfjob(**container: str) -> str:
    """TFJOB with `container`'s lines (YAML, flow style) added to its container."""
    lines = "".join(f"              {key}: {value}\n" for key, value in container.items())
    return TFJOB.replace("              resources:", lines + "              resources:")


def imported(client, text: str):
    return client.post("/jobs/new/import/", {"yaml": text, "team": "maps"}, HTTP_HX_REQUEST="true")


def as_a_browser_posts(body: str) -> dict:
    """The filled form's fields as a browser sends them: a text area's line breaks as CRLF."""
    return {name: value.replace("\n", "\r\n") if isinstance(value, str) else value
            for name, value in form_fields(body).items()}  # fmt: skip


def through_the_page(client, text: str) -> Job:
    """The job the page makes of `text`: imported, then submitted as filled."""
    page = imported(client, text)
    assert page.status_code == 200, page.content.decode()
    response = client.post("/jobs/new/", as_a_browser_posts(page.content.decode()))
    assert response.status_code == 302, response.content.decode()
    return Job.objects.get(name="mnist")


def through_the_api(client, text: str) -> dict:
    response = client.post("/api/v1/jobs/?team=maps", data=text.replace("name: mnist", "name: mnist-api"),
                           content_type="application/yaml")  # fmt: skip
    assert response.status_code == 201, response.json()
    return response.json()


SCRIPT = 'command: [bash, -c]\n              args:\n                - |\n                  pip install -r "requirements.txt"\n' \
         "                  torchrun train.py --name 'it''s'\n"  # fmt: skip


def test_a_script_of_several_lines_in_args_is_kept_as_the_api_keeps_it(login, owner, nodes):
    client = login(owner)
    text = TFJOB.replace("              command: [python, train.py]\n", "              " + SCRIPT)
    api = through_the_api(client, text)
    job = through_the_page(client, text)
    assert job.args == api["args"] == ["pip install -r \"requirements.txt\"\ntorchrun train.py --name 'it''s'\n"]
    assert job.command == api["command"] == ["bash", "-c"]


@pytest.mark.parametrize("value", ['"a.example\\nb.example"', '"  indented\\n\\nEND\\n"', '" padded "', '""'],
                         ids=["two lines", "blank lines and a line END", "spaces at either end", "empty"])  # fmt: skip
def test_an_env_value_is_kept_as_the_api_keeps_it(login, owner, nodes, value):
    client = login(owner)
    text = tfjob(env=f"[{{name: OTHER, value: x}}, {{name: HOSTS, value: {value}}}]")
    api = through_the_api(client, text)
    job = through_the_page(client, text)
    assert job.env == api["env"] and set(job.env) == {"OTHER", "HOSTS"}


def test_a_value_of_several_lines_is_shown_as_its_lines(login, owner, nodes):
    body = imported(login(owner), tfjob(env='[{name: HOSTS, value: "a.example\\nb.example"}]')).content.decode()
    assert ">\nHOSTS&lt;&lt;END\na.example\nb.example\nEND</textarea>" in body


def test_a_value_of_several_lines_never_closed_is_marked_by_the_field(login, owner, nodes):
    from tests.pages.test_submit_page import form_data

    response = login(owner).post("/jobs/new/", form_data(env="HOSTS<<END\na.example\nDATASET=imagenet"))
    body = response.content.decode()
    assert response.status_code == 422 and 'id="field-env"' in body
    assert "Line 1: HOSTS&lt;&lt;END is never closed by a line END." in body


TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llm, namespace: maps}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime, numNodes: 2, resourcesPerNode: {limits: {nvidia.com/gpu: 1}}}
  runtimePatches:
    - manager: me
      trainingRuntimeSpec: {template: {spec: {replicatedJobs: 5}}}
"""
WORKER = "spec.tfReplicaSpecs.Worker.template.spec"
MALFORMED = {
    "a namespace that is a list": (TFJOB.replace("namespace: maps", "namespace: [maps]"), "metadata.namespace",
                                   "Must be a string, got list."),
    "a namespace that is a mapping": (TFJOB.replace("namespace: maps", "namespace: {team: maps}"), "metadata.namespace",
                                      "Must be a string, got dict."),
    "an env name that is a list": (tfjob(env="[{name: [A], value: x}]"), f"{WORKER}.containers[0].env[0].name",
                                   "Must be a string, got list."),
    "a volume name that is a list": (
        tfjob(volumeMounts="[{name: [d], mountPath: /data}]").replace(
            "          containers:", "          volumes: [{name: [d], persistentVolumeClaim: {claimName: data}}]\n"
                                    "          containers:"),
        f"{WORKER}.volumes[0].name", "Must be a string, got list."),
    "a mount's name that is a list": (tfjob(volumeMounts="[{name: [d], mountPath: /data}]"),
                                      f"{WORKER}.containers[0].volumeMounts[0].name", "Must be a string, got list."),
    "replicatedJobs that is a number": (TRAINJOB, "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs",
                                        "Must be a list of replicated jobs."),
}  # fmt: skip


@pytest.mark.parametrize(("text", "path", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_manifest_is_refused_by_the_page_as_by_the_api_naming_the_path(login, owner, nodes, text, path,
                                                                                   message):  # fmt: skip
    client = login(owner)
    api = client.post("/api/v1/jobs/?team=maps", data=text, content_type="application/yaml")
    assert api.status_code == 400 and message in api.json()[path][0], api.json()
    page = imported(client, text)
    assert page.status_code == 422
    assert f"{path}: {message}" in page.content.decode()


def test_a_spec_whose_team_is_a_list_is_refused_by_the_page_as_by_the_api(login, owner, nodes):
    client = login(owner)
    text = "{team: [maps], name: x, image: busybox, replicas: [{count: 1}]}"
    assert client.post("/api/v1/jobs/?team=maps", data=text, content_type="application/yaml").status_code == 400
    page = imported(client, text)
    assert page.status_code == 422 and "team: Must be a string, got list." in page.content.decode()


def test_an_imported_deadline_is_kept_to_the_second(login, owner, nodes):
    client = login(owner)
    text = TFJOB.replace("activeDeadlineSeconds: 3600", "activeDeadlineSeconds: 90")
    assert 'name="max_runtime" value="1 min 30 s"' in imported(client, text).content.decode()
    assert through_the_page(client, text).max_runtime == through_the_api(client, text)["max_runtime"] == 90


def test_a_resubmission_keeps_the_max_runtime_to_the_second(login, owner, submit):
    client = login(owner)
    job = submit(name="short", max_runtime=90)
    body = client.get(f"/jobs/new/?from={job.pk}").content.decode()
    assert 'name="max_runtime" value="1 min 30 s"' in body
    assert client.post("/jobs/new/", as_a_browser_posts(body)).status_code == 302
    assert Job.objects.exclude(pk=job.pk).get().max_runtime == 90


@pytest.mark.parametrize(("text", "seconds"), [("60", 3600), ("90 s", 90), ("1 h 30 min", 5400), ("2h 5min 10s", 7510)])
def test_the_max_runtime_is_minutes_or_a_duration(login, owner, text, seconds):
    from tests.pages.test_submit_page import form_data

    assert login(owner).post("/jobs/new/", form_data(max_runtime=text)).status_code == 302
    assert Job.objects.get().max_runtime == seconds


@pytest.mark.parametrize(("text", "message"), [("soon", "Write minutes, or a duration such as 90 s or 1 h 30 min."),
                                               ("0", "Must be from 1 s to 720 h (30 days), got 0 min."),
                                               ("999999 h", "Must be from 1 s to 720 h (30 days), got 999999 h."),
                                               ("43201", "Must be from 1 s to 720 h (30 days), got 43201 min.")])
def test_a_max_runtime_it_cannot_take_is_marked_by_the_field(login, owner, text, message):
    from tests.pages.test_submit_page import form_data

    response = login(owner).post("/jobs/new/", form_data(max_runtime=text))
    body = response.content.decode()
    assert response.status_code == 422 and 'id="error-max_runtime"' in body and message in body
    assert not Job.objects.exists()


def test_a_deadline_given_as_text_is_not_read_as_minutes(login, owner, nodes):
    text = TFJOB.replace("activeDeadlineSeconds: 3600", 'activeDeadlineSeconds: "90"')
    page = imported(login(owner), text)
    assert page.status_code == 422 and "name=\"max_runtime\" value=\"&#x27;90&#x27;\"" in page.content.decode()


def test_an_env_value_left_empty_is_empty_on_the_page_as_in_the_api(login, owner, nodes):
    client = login(owner)
    text = tfjob(env="[{name: DEBUG, value: }, {name: OTHER, value: x}]")  # YAML's null: Kubernetes reads ""
    assert through_the_api(client, text)["env"] == {"DEBUG": "", "OTHER": "x"}
    assert ">\nDEBUG=\nOTHER=x</textarea>" in imported(client, text).content.decode()
    assert through_the_page(client, text).env == {"DEBUG": "", "OTHER": "x"}


def test_the_imported_form_posted_twice_makes_one_job(login, owner, nodes):
    client = login(owner)
    first, second = (imported(client, TFJOB).content.decode() for _ in range(2))
    key = form_fields(first)["submission"]
    assert len(key) == 32 and key != form_fields(second)["submission"]  # each form filled gets its own
    posts = [client.post("/jobs/new/", as_a_browser_posts(first)) for _ in range(2)]  # a retried post
    assert [post.status_code for post in posts] == [302, 302] and posts[0]["Location"] == posts[1]["Location"]
    assert Job.objects.count() == 1


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: maps}
spec:
  replicas: 1
  template: {spec: {containers: [{name: web, image: nginx}]}}
"""


def test_a_manifest_of_a_kind_gangway_does_not_run_is_refused_and_fills_nothing(login, owner, nodes):
    client = login(owner)
    typed = {**opened(client, "/jobs/new/"), "name": "typed-before", "yaml": DEPLOYMENT}
    page = client.post("/jobs/new/import/", typed, HTTP_HX_REQUEST="true")
    body = page.content.decode()
    assert page.status_code == 422
    assert "An apps/v1 Deployment is not a job kind Gangway runs; it takes a kubeflow.org/v1 TFJob" in body
    assert "Filled from the pasted manifest" not in body and "Every field of the manifest" not in body
    fields = form_fields(body)
    assert fields["name"] == "typed-before" and fields["kind"] == typed["kind"]  # the form as it was
    assert "Select a valid choice" not in body and "This field is required" not in body


def test_an_empty_mapping_fills_nothing_and_claims_nothing_carried_over(login, owner, nodes):
    page = imported(login(owner), "{}")
    body = page.content.decode()
    assert page.status_code == 422 and "The mapping is empty" in body
    assert "Every field of the manifest" not in body
