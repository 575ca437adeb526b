"""The submit form: submission, errors by the fields, the live fit preview, YAML import, resubmission."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from tenants.models import PriorityTier

pytestmark = pytest.mark.django_db


def form_data(**overrides) -> dict:
    data = {
        "team": "maps", "kind": "TFJob", "name": "resnet", "image": "tensorflow/tensorflow:2.12.0-gpu",
        "command": "python train.py", "args": "--epochs 3", "tier": "", "max_runtime": "60", "env": "DATASET=imagenet",
        "replicas-TOTAL_FORMS": "1", "replicas-INITIAL_FORMS": "0", "replicas-MIN_NUM_FORMS": "1",
        "replicas-MAX_NUM_FORMS": "5", "replicas-0-role": "Worker", "replicas-0-count": "2", "replicas-0-gpu": "1",
        "replicas-0-cpu": "", "replicas-0-memory": "",
    }  # fmt: skip
    data.update(overrides)
    return data


@pytest.mark.parametrize("persona, status", [("owner", 200), ("outsider", 200), ("staff", 200), (None, 302)])
def test_access_to_the_form(request, login, persona, status, maps):
    user = request.getfixturevalue(persona) if persona else None
    assert login(user).get("/jobs/new/").status_code == status


def test_the_form_names_the_kinds_it_takes_as_a_sentence(login, owner):
    body = login(owner).get("/jobs/new/").content.decode()
    assert "A TFJob, PyTorchJob or TrainJob, admitted as a whole gang" in body
    assert "Import TFJob, PyTorchJob or TrainJob YAML" in body


def test_it_submits_a_job(login, owner):
    response = login(owner).post("/jobs/new/", form_data())
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert (job.owner, job.team.slug, job.state, job.gpu_total) == (owner, "maps", "queued", 2)
    assert job.command == ["python", "train.py"] and job.args == ["--epochs", "3"]
    assert job.env == {"DATASET": "imagenet"} and job.max_runtime == 3600 and job.submitted_via == "form"


def test_it_submits_several_replica_groups(login, owner):
    data = form_data(**{"replicas-TOTAL_FORMS": "2", "replicas-1-role": "Chief", "replicas-1-count": "1",
                        "replicas-1-gpu": "0", "replicas-1-cpu": "500m", "replicas-1-memory": "2Gi"})  # fmt: skip
    assert login(owner).post("/jobs/new/", data).status_code == 302
    assert Job.objects.get().replicas[1] == {"role": "Chief", "count": 1, "gpu": 0, "cpu": 500, "memory": 2 * 1024**3}


def test_the_same_form_posted_twice_makes_one_job(login, owner):
    client = login(owner)
    key = re.search(r'name="submission" value="([0-9a-f]{32})"', client.get("/jobs/new/").content.decode())[1]
    first = client.post("/jobs/new/", form_data(submission=key))
    second = client.post("/jobs/new/", form_data(submission=key), follow=True)  # a double click
    job = Job.objects.get()
    assert first["Location"] == f"/jobs/{job.pk}/" and second.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert (f"This form was already submitted: it made resnet (#{job.pk}). To run it again, use Resubmit on its "
            "page.") in second.content.decode()  # fmt: skip
    assert key not in client.get("/jobs/new/").content.decode()  # each form shown gets its own
    edited = client.post("/jobs/new/", form_data(submission=key, name="resnet-2"))  # back, edit, submit again
    again = client.post("/jobs/new/", form_data(submission=key, name="resnet-2"))  # ...with a double click
    assert edited.status_code == again.status_code == 302 and edited["Location"] == again["Location"]
    assert Job.objects.count() == 2


def test_htmx_submission_redirects_by_header(login, owner, htmx):
    response = login(owner).post("/jobs/new/", form_data(), **htmx)
    assert response["HX-Redirect"] == f"/jobs/{Job.objects.get().pk}/"


def test_an_invalid_post_answers_422_with_errors_by_the_fields(login, owner):
    response = login(owner).post("/jobs/new/", form_data(name="Bad_Name", **{"replicas-0-gpu": "-1"}))
    body = response.content.decode()
    assert response.status_code == 422
    assert "2 problems stop this job from being submitted" in body
    assert 'id="field-name"' in body and "lowercase letters" in body
    assert "Ensure this value is greater than or equal to 0." in body
    assert not Job.objects.exists()


def test_spec_errors_land_by_their_fields(login, owner):
    response = login(owner).post("/jobs/new/", form_data(image="Not An Image", **{"replicas-0-role": "Chief",
                                                                                    "replicas-0-count": "2"}))
    body = response.content.decode()
    assert response.status_code == 422
    assert "Not a valid image reference" in body
    assert "A TFJob has exactly one Chief, got 2." in body


def test_an_invalid_htmx_post_answers_the_form_fragment(login, owner, htmx):
    response = login(owner).post("/jobs/new/", form_data(name=""), **htmx)
    body = response.content.decode()
    assert response.status_code == 422
    assert body.lstrip().startswith('<form id="job-form"')
    assert "This field is required." in body


def test_a_job_that_can_never_fit_is_refused_with_the_limit(login, owner, cycle):
    cycle()  # the cluster's nodes are known
    response = login(owner).post("/jobs/new/", form_data(**{"replicas-0-count": "3", "replicas-0-gpu": "8"}))
    assert response.status_code == 422
    assert "Can never run" in response.content.decode()
    assert not Job.objects.exists()


def test_it_refuses_a_team_the_user_is_not_in(login, outsider, maps):
    response = login(outsider).post("/jobs/new/", form_data(team="maps"))
    assert response.status_code == 422
    assert not Job.objects.exists()


def test_tiers_are_limited_to_the_teams(login, owner, maps, tiers, htmx):
    maps.tiers.set([tiers["standard"]])
    body = login(owner).get("/jobs/new/").content.decode()
    assert '<option value="standard"' in body and '<option value="experiment"' not in body
    fragment = login(owner).get("/jobs/new/?team=maps", HTTP_HX_TARGET="tier-field", **htmx)
    assert fragment.content.decode().lstrip().startswith('<div class="field" id="tier-field">')
    assert fragment["HX-Trigger-After-Settle"] == "tiers-changed"
    response = login(owner).post("/jobs/new/", form_data(tier="experiment"))
    assert response.status_code == 422 and not Job.objects.exists()


def test_the_preview_says_a_job_starts_now(login, owner, cycle):
    cycle()
    body = login(owner).post("/jobs/preview/".replace("/jobs/preview/", "/jobs/new/preview/"), form_data()).content.decode()
    assert "Starts now" in body and "node-01" in body


def test_the_preview_gives_the_position_of_a_job_that_waits(login, owner, fill_and_wait):
    fill_and_wait(1)
    body = login(owner).post("/jobs/new/preview/", form_data(**{"replicas-0-count": "1", "replicas-0-gpu": "8"})).content.decode()
    assert 'class="preview waits"' in body and "position 2" in body and "Estimated start" in body


def test_the_preview_says_what_can_never_run(login, owner, cycle):
    cycle()
    body = login(owner).post("/jobs/new/preview/", form_data(**{"replicas-0-count": "3", "replicas-0-gpu": "8"})).content.decode()
    assert "Can never run" in body and "24" in body


def test_the_preview_works_before_name_and_image(login, owner, cycle):
    cycle()
    body = login(owner).post("/jobs/new/preview/", form_data(name="", image="")).content.decode()
    assert "Starts now" in body


def test_the_preview_asks_for_replicas(login, owner):
    body = login(owner).post("/jobs/new/preview/", form_data(**{"replicas-0-count": ""})).content.decode()
    assert "Fill in the replica groups" in body


def test_the_preview_needs_a_post_and_login(client, login, owner):
    assert client.post("/jobs/new/preview/", form_data()).status_code == 302
    assert login(owner).get("/jobs/new/preview/").status_code == 405


TFJOB = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: mnist, namespace: maps, labels: {a: b}}
spec:
  runPolicy: {activeDeadlineSeconds: 7200, cleanPodPolicy: All}
  tfReplicaSpecs:
    Worker:
      replicas: 3
      template:
        spec:
          nodeSelector: {gpu: a100}
          containers:
          - name: tensorflow
            image: tensorflow/tensorflow:2.12.0-gpu
            command: [python, /app/mnist.py]
            resources: {limits: {nvidia.com/gpu: 2, cpu: "4", memory: 16Gi}}
"""


def test_importing_a_tfjob_fills_the_form_and_lists_what_was_not_carried_over(login, owner, htmx):
    response = login(owner).post("/jobs/new/import/", {"yaml": TFJOB, "team": "maps"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert 'value="mnist"' in body and ">\npython /app/mnist.py</textarea>" in body
    assert 'name="replicas-0-count" value="3"' in body and 'name="replicas-0-gpu" value="2"' in body
    assert 'value="120"' in body  # 7200 s as minutes
    for path in ("metadata.labels", "spec.runPolicy.cleanPodPolicy", "template.spec.nodeSelector"):
        assert path in body


def test_importing_broken_yaml_says_why(login, owner, htmx):
    response = login(owner).post("/jobs/new/import/", {"yaml": "kind: [", "team": "maps"}, **htmx)
    assert response.status_code == 422
    assert "Not valid YAML" in response.content.decode()


PYTORCHJOB_WITHOUT_CONTAINERS = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: slight}
spec:
  pytorchReplicaSpecs:
    worker: {replicas: 2, template: {spec: {}}}
"""


def test_a_manifest_that_cannot_be_read_says_where_and_judges_nothing_else(login, owner, htmx):
    """Only the manifest was sent to be read: the empty name and image are not 'required' yet."""
    data = form_data(yaml=PYTORCHJOB_WITHOUT_CONTAINERS, name="", image="typed-before",
                     **{"replicas-0-count": "", "replicas-0-gpu": ""})  # fmt: skip
    response = login(owner).post("/jobs/new/import/", data, **htmx)
    body = response.content.decode()
    assert response.status_code == 422
    assert "spec.pytorchReplicaSpecs.worker.template.spec.containers: Required: one container." in body
    assert "This field is required." not in body and "Please submit at least 1 form" not in body
    assert 'value="typed-before"' in body


def test_resubmit_pre_fills_the_form(login, owner, submit):
    job = submit(name="again", command=["python", "run.py"], replicas=[{"role": "Worker", "count": 3, "gpu": 2}])
    body = login(owner).get(f"/jobs/new/?from={job.pk}").content.decode()
    assert 'value="again"' in body and ">\npython run.py</textarea>" in body
    assert 'name="replicas-0-count" value="3"' in body


@pytest.mark.parametrize("copied", ["²", "١", "9" * 30, "-1", ""])
def test_a_copy_of_no_job_opens_the_form_empty(login, owner, copied):
    # "²" is a digit to str.isdigit() and not to int(): it answered 500.
    response = login(owner).get(f"/jobs/new/?from={copied}")
    assert response.status_code == 200 and 'name="name"' in response.content.decode()


def test_resubmit_of_another_teams_job_answers_404(login, outsider, submit):
    job = submit()
    assert login(outsider).get(f"/jobs/new/?from={job.pk}").status_code == 404


def test_the_form_needs_the_csrf_token(csrf_client, owner):
    csrf_client.force_login(owner)
    assert csrf_client.post("/jobs/new/", form_data()).status_code == 403
    assert not Job.objects.exists()


def test_base_configures_htmx_to_swap_422_once(login, owner):
    body = login(owner).get("/jobs/new/").content.decode()
    assert body.count('name="htmx-config"') == 1
    assert '{"code": "422", "swap": true}' in body


def test_it_submits_volumes_and_shm(login, owner):
    data = form_data(volumes="claim datasets /data ro\nconfigmap train-config /etc/train\n", shm="8Gi",
                     **{"replicas-0-memory": "4Gi"})  # fmt: skip
    assert login(owner).post("/jobs/new/", data).status_code == 302
    job = Job.objects.get()
    assert job.volumes == [{"claim": "datasets", "path": "/data", "read_only": True},
                           {"config_map": "train-config", "path": "/etc/train"}]  # fmt: skip
    assert job.shm == 8 * 1024**3 and job.replicas[0]["memory"] == 12 * 1024**3


@pytest.mark.parametrize(
    ("volumes", "fragment"),
    [("claim datasets", "Line 1: write claim NAME PATH"), ("claim ok /data\nclaim datasets /dev/shm", "Line 2: ")],
    ids=["a line it cannot read", "a path the spec refuses"],
)
def test_a_bad_volume_line_is_marked_by_the_field(login, owner, volumes, fragment):
    response = login(owner).post("/jobs/new/", form_data(volumes=volumes))
    body = response.content.decode()
    assert response.status_code == 422 and 'id="field-volumes"' in body and fragment in body
    assert not Job.objects.exists()


def test_resubmitting_keeps_volumes_and_asks_for_the_memory_without_shm(login, owner):
    login(owner).post("/jobs/new/", form_data(volumes="claim datasets /data", shm="8Gi", **{"replicas-0-memory": "4Gi"}))
    body = login(owner).get(f"/jobs/new/?from={Job.objects.get().pk}").content.decode()
    assert "claim datasets /data</textarea>" in body
    assert 'name="shm" value="8Gi"' in body and 'name="replicas-0-memory" value="4Gi"' in body


def test_the_job_page_shows_volumes_and_shm(login, owner):
    login(owner).post("/jobs/new/", form_data(volumes="claim datasets /data ro", shm="8Gi", **{"replicas-0-memory": "4Gi"}))
    body = login(owner).get(f"/jobs/{Job.objects.get().pk}/").content.decode()
    assert "claim <code>datasets</code> at <code>/data</code>, read-only" in body
    assert "8 GiB at <code>/dev/shm</code>" in body
    assert "claimName: datasets" in body and "medium: Memory" in body  # the manifest


def test_importing_a_manifest_fills_volumes_and_shm_and_lists_a_host_path(login, owner, htmx):
    from tests.jobs.test_yaml_import import PYTORCHJOB_WITH_VOLUMES

    body = login(owner).post("/jobs/new/import/", {"yaml": PYTORCHJOB_WITH_VOLUMES, "team": "maps"}, **htmx).content.decode()
    assert "claim datasets /data ro\nconfigmap train-config /etc/train</textarea>" in body
    assert 'name="shm" value="8Gi"' in body and 'name="replicas-0-memory" value="16Gi"' in body
    assert "template.spec.volumes[3] (hostPath" in body


def test_the_preview_counts_shm_in_each_replicas_memory(login, owner, cycle):
    cycle()  # nodes of 512 GiB
    fits = login(owner).post("/jobs/new/preview/", form_data(shm="500Gi", **{"replicas-0-memory": "8Gi"}))
    assert "Starts now" in fits.content.decode()
    too_big = login(owner).post("/jobs/new/preview/", form_data(shm="510Gi", **{"replicas-0-memory": "8Gi"}))
    assert "Can never run" in too_big.content.decode()


def test_the_preview_asks_for_memory_when_shm_has_nothing_to_add_to(login, owner, cycle):
    cycle()
    body = login(owner).post("/jobs/new/preview/", form_data(shm="8Gi")).content.decode()
    assert "Give a memory request: the 8Gi /dev/shm is counted in it" in body
