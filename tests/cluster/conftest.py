"""Fixtures for the cluster tests: one fake API server per module, emptied before each test."""

import pytest
from kubernetes.client import Configuration

from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.kubernetes_api import client_for
from tests.cluster.fake_apiserver import FakeApiServer


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
