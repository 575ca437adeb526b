"""Fixtures for the cluster tests: one fake API server per module, emptied before each test."""

import pytest
from kubernetes.client import Configuration

from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_api import client_for
from tests.cluster.busy_cluster import node
from tests.cluster.fake_apiserver import FakeApiServer
from tests.conftest import make_team, spec_data


@pytest.fixture(scope="module")
def apiserver():
    server = FakeApiServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake(apiserver):
    """The module's fake API server with no objects, no faults and an empty request log."""
    apiserver.reset()
    return apiserver


@pytest.fixture
def cluster(fake):
    """A KubernetesCluster talking HTTP to the fake, with a short retry budget."""
    return KubernetesCluster(client_for(Configuration(host=fake.url)), retry_budget=0.5)


@pytest.fixture
def four_teams(fake, tiers, owner):
    """Nodes n1 and n2 of 8 GPUs, n3 of 4; teams alpha (4 nominal, may borrow 4), beta 4, gamma 8 and delta 4,
    each with its namespace. Returns `submit(team slug, GPUs, name)`: a one-replica job of that team."""
    for name, gpu in (("n1", 8), ("n2", 8), ("n3", 4)):
        fake.add(node(name, gpu))
    teams = {}
    for slug, gpu, borrow in (("alpha", 4, 4), ("beta", 4, 0), ("gamma", 8, 0), ("delta", 4, 0)):
        teams[slug] = make_team(slug, tiers, gpu=gpu, borrowing_limit=borrow)
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})

    def submit(slug: str, gpus: int, name: str = "train") -> Job:
        spec = parse_spec(spec_data(team=slug, name=name, replicas=[{"role": "Worker", "count": 1, "gpu": gpus}]))
        return job_submit(team=teams[slug], owner=owner, spec=spec)[0]
    return submit
