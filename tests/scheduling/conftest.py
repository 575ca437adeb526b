from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import SimNode
from scheduling.reconcile import reconcile


class Clock:
    """A hand-moved clock shared by the simulated cluster and the loop."""

    def __init__(self):
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def cluster(nodes, clock):
    return SimulatedCluster(clock=clock, seed=1, failure_rate=0)


@pytest.fixture
def cycle(cluster, clock):
    """Run a reconcile and an admission cycle at the clock's time; returns the cycle's result."""

    def _cycle(on=None):
        target = on or cluster
        reconcile(cluster=target, now=clock())
        return admission_cycle(cluster=target, now=clock())

    return _cycle


@pytest.fixture
def third_node(nodes):
    """A third simulated node of 8 GPUs, node-03, beside the two of `nodes`."""
    return SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3)
