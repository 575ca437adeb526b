"""The cluster port and the registry of its adapters (chosen by CLUSTER_BACKEND)."""

from __future__ import annotations

from collections.abc import Callable

from scheduling.cluster.base import Cluster, ClusterUnavailable, cluster_name

__all__ = ("Cluster", "ClusterUnavailable", "cluster_name", "get_cluster", "ADAPTERS")


# Each adapter is imported only once it is chosen: the Kubernetes one loads the kubernetes
# client, which a simulated install never needs; the simulated one loads the database models,
# which this package's base types (read by the policy's callers and the tests) must not need.


def _simulated() -> Cluster:
    from scheduling.cluster.simulated import SimulatedCluster

    return SimulatedCluster()


def _kubernetes() -> Cluster:
    from scheduling.cluster.kubernetes import KubernetesCluster

    return KubernetesCluster.from_environment()


ADAPTERS: dict[str, Callable[[], Cluster]] = {"simulated": _simulated, "kubernetes": _kubernetes}


def get_cluster() -> Cluster:
    """The adapter CLUSTER_BACKEND names, built fresh (adapters hold no state between calls)."""
    from django.conf import settings

    return ADAPTERS[settings.CLUSTER_BACKEND]()
