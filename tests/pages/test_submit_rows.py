"""The submit form's replica rows: every row posted is a group, whatever its values."""

from __future__ import annotations

import pytest

from jobs.models import Job

pytestmark = pytest.mark.django_db


def form_data(*rows: dict, initial: int = 1) -> dict:
    """A PyTorchJob's post with `rows` as its replica rows, the first `initial` of them the page's own."""
    data = {
        "team": "maps", "kind": "PyTorchJob", "name": "ddp", "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "command": "torchrun train.py", "args": "", "tier": "", "max_runtime": "", "env": "",
        "replicas-TOTAL_FORMS": str(len(rows)), "replicas-INITIAL_FORMS": str(initial),
        "replicas-MIN_NUM_FORMS": "1", "replicas-MAX_NUM_FORMS": "5",
    }  # fmt: skip
    for index, row in enumerate(rows):
        values = {"cpu": "", "memory": "", **row}
        data.update({f"replicas-{index}-{key}": value for key, value in values.items()})
    return data


MASTER = {"role": "Master", "count": "1", "gpu": "1"}
AS_ADDED = {"role": "Worker", "count": "1", "gpu": "1"}  # what "+ Add replica group" adds


def groups_of(job: Job) -> dict:
    return {group["role"]: (group["count"], group["gpu"]) for group in job.replicas}


def test_a_row_added_and_left_as_it_came_keeps_its_gpu(login, owner, nodes):
    response = login(owner).post("/jobs/new/", form_data(MASTER, AS_ADDED))
    assert response.status_code == 302
    assert groups_of(Job.objects.get()) == {"Master": (1, 1), "Worker": (1, 1)}


def test_a_lone_row_of_an_import_left_as_it_came_is_submitted(login, owner, nodes):
    response = login(owner).post("/jobs/new/", form_data(AS_ADDED, initial=0))
    assert response.status_code == 302
    assert groups_of(Job.objects.get()) == {"Worker": (1, 1)}


def test_the_preview_counts_the_gpu_of_a_row_left_as_it_came(login, owner, cycle):
    cycle()
    body = login(owner).post("/jobs/new/preview/", form_data(MASTER, AS_ADDED)).content.decode()
    assert "2 GPUs over 2 replica groups" in body


def test_a_row_removed_from_an_imported_form_is_gone(login, owner, nodes):
    """An import of two groups, the second removed: the post says one row of two the page had."""
    response = login(owner).post("/jobs/new/", form_data(AS_ADDED, initial=2))
    assert response.status_code == 302
    assert groups_of(Job.objects.get()) == {"Worker": (1, 1)}


def test_a_row_cleared_of_its_values_is_marked_required_not_dropped(login, owner, nodes):
    response = login(owner).post("/jobs/new/", form_data(MASTER, {"role": "Worker", "count": "", "gpu": ""}))
    body = response.content.decode()
    assert response.status_code == 422 and "2 problems stop this job from being submitted" in body
    assert 'id="error-replicas-1-count"' in body and 'id="error-replicas-1-gpu"' in body
    assert not Job.objects.exists()


def test_an_imported_form_says_its_rows_are_the_pages_own(login, owner, htmx):
    manifest = (
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: ddp}\nspec:\n  pytorchReplicaSpecs:\n"
        "    Worker:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
        "            - {name: pytorch, image: pytorch/pytorch:2.3.0, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    body = login(owner).post("/jobs/new/import/", {"yaml": manifest, "team": "maps"}, **htmx).content.decode()
    assert 'name="replicas-INITIAL_FORMS" value="1"' in body
