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
    """The adapter CLUSTER_BACKEND names, built fresh (adapters hold no state between calls).

    Raises ClusterUnavailable when it cannot be built (no Kubernetes configuration found): commands
    say so and stop; the loop's tasks take `cluster_or_unbuilt` instead."""
    from django.conf import settings

    return ADAPTERS[settings.CLUSTER_BACKEND]()


class Unbuilt:
    """Stands in for an adapter that could not be built: every call raises why, as an unreachable
    cluster's calls do. The loop and reconcile then record an unreachable cluster (the cycle's row,
    /readyz, each queued job's reason) where their task would fail before either ran."""

    def __init__(self, error: ClusterUnavailable) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Callable[..., object]:
        def unreachable(*args: object, **kwargs: object) -> object:
            raise ClusterUnavailable(str(self.error))

        return unreachable


def cluster_or_unbuilt() -> Cluster:
    """The adapter CLUSTER_BACKEND names or, when it cannot be built, a stand-in that is unreachable."""
    try:
        return get_cluster()
    except ClusterUnavailable as error:
        return Unbuilt(error)  # type: ignore[return-value]  # answers every call of the port, by raising
