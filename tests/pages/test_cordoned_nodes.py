"""Pages during a partial drain: a node that takes no new pods (cordoned) is marked on the dashboard's node
map and never counted as free, and a job only it could hold is previewed, and taken, as one that waits."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.models import SimNode
from tests.pages.test_submit_page import form_data

pytestmark = pytest.mark.django_db

WHOLE_NODE = {"replicas-0-count": "1", "replicas-0-gpu": "8"}


def cordon(name: str, *, schedulable: bool = False) -> None:
    """Cordons a simulated node as an admin does in the admin's node list (`manage.py cordon` does the same)."""
    SimNode.objects.filter(name=name).update(schedulable=schedulable)


def test_a_cordoned_node_is_marked_on_the_map_and_its_gpus_are_not_free(login, staff, submit, cycle):
    submit(name="small", replicas=[{"role": "Worker", "count": 1, "gpu": 3}])
    cordon("node-02")
    cycle()

    body = login(staff).get("/").content.decode()

    assert ('<div class="node unschedulable" title="node-02 (cordoned, takes no new jobs): 0 of 8 GPUs in use">'
            '<span class="node-name">node-02 · cordoned</span>') in body
    assert '<span class="unschedulable" title="not free: the node takes no new jobs">' + "<i></i>" * 8 in body
    assert body.count('<i class="free"></i>') == 5  # node-01's only
    assert '<span class="tile-value num">3<small> / 8</small></span>' in body  # capacity: the nodes taking jobs
    assert "8 GPUs more on nodes that take no new jobs (cordoned or tainted)" in body
    assert '<i class="key unschedulable"></i>Not free: the node takes no new jobs' in body


def test_the_polled_map_marks_a_node_once_it_is_cordoned_and_unmarks_it_once_uncordoned(login, staff, cycle, htmx):
    cycle()
    client = login(staff)
    assert "node unschedulable" not in client.get("/?part=nodes", **htmx).content.decode()

    cordon("node-01")
    cycle()
    assert 'title="node-01 (cordoned, takes no new jobs)' in client.get("/?part=nodes", **htmx).content.decode()

    cordon("node-01", schedulable=True)
    cycle()
    assert "node unschedulable" not in client.get("/?part=nodes", **htmx).content.decode()


def test_the_preview_and_the_form_take_a_job_only_a_cordoned_node_could_hold_as_one_that_waits(login, owner, cycle):
    SimNode.objects.filter(name="node-01").update(gpu=4)
    cordon("node-02")
    cycle()
    client = login(owner)

    preview = client.post("/jobs/new/preview/", form_data(**WHOLE_NODE)).content.decode()
    assert 'class="preview waits"' in preview and "Can never run" not in preview
    assert "only node-02 (cordoned) could hold a replica of 8 GPUs" in preview

    response = client.post("/jobs/new/", form_data(**WHOLE_NODE))
    assert response.status_code == 302
    assert Job.objects.get().state == Job.State.QUEUED


def test_a_job_too_large_even_for_the_cordoned_node_still_can_never_run(login, owner, cycle):
    cordon("node-02")
    cycle()

    preview = login(owner).post("/jobs/new/preview/", form_data(**{"replicas-0-count": "3", "replicas-0-gpu": "8"}))

    assert "Can never run" in preview.content.decode()
