"""The cluster API during a drain: a job keeps running on a node that takes no new pods (cordoned). `used`
stays the teams' figure, wherever jobs run; `in_use` is the part of it on the nodes that take pods, which
`capacity` counts, and `free` is what is left of `capacity`; the cordoned node's GPUs and what jobs hold there
are given apart, for the cluster and for each GPU type. Every persona that reads the cluster reads the same."""

from __future__ import annotations

import pytest

from tests.api.conftest import PERSONAS
from tests.pages.test_drain_figures import drained, drained_a100  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_the_cluster_says_what_capacity_is_used_by_and_the_drained_node_apart(as_persona, drained):  # noqa: F811
    body = as_persona("member").get("/api/v1/cluster/").json()
    figures = {name: body[name] for name in ("capacity", "used", "in_use", "outside", "free", "unschedulable",
                                             "unschedulable_used")}  # fmt: skip
    assert figures == {"capacity": 8, "used": 10, "in_use": 4, "outside": 0, "free": 4, "unschedulable": 8,
                       "unschedulable_used": 6}  # fmt: skip
    assert body["free"] == body["capacity"] - body["in_use"] - body["outside"]


def test_each_type_says_the_same_of_its_nodes(as_persona, drained_a100):  # noqa: F811
    a100 = as_persona("member").get("/api/v1/cluster/").json()["by_type"]["a100"]
    assert (a100["capacity"], a100["used"], a100["in_use"], a100["free"], a100["unschedulable"],
            a100["unschedulable_used"]) == (8, 10, 4, 4, 8, 6)  # fmt: skip


def test_without_a_drain_in_use_is_used_and_nothing_is_apart(as_persona, submit, cycle):
    submit(name="one", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    body = as_persona("member").get("/api/v1/cluster/").json()
    assert (body["used"], body["in_use"], body["unschedulable"], body["unschedulable_used"]) == (4, 4, 0, 0)


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_persona_that_reads_the_cluster_reads_the_drain_figures(as_persona, drained, persona):  # noqa: F811
    response = as_persona(persona).get("/api/v1/cluster/")
    if response.status_code == 200:
        assert response.json()["unschedulable_used"] == 6
    else:
        assert response.status_code in (401, 403)
