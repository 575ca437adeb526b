"""The cluster's GPU types (tenants.GpuType) as the cluster port takes them: name, node label, value.

The snapshot, the node mirror, the previews and the tenant sync read them here and
match them to node labels with `scheduling.cluster.node_types` (pure, so the
adapters' doctor uses it without the database). On a cluster without GpuType rows
the answer is empty, and everything reads as it did before types.
"""

from __future__ import annotations

from scheduling.cluster.base import TypeLabel
from tenants.selectors import gpu_types


def known_types() -> tuple[TypeLabel, ...]:
    """Returns the cluster's GPU types, cheapest first; empty when it has none."""
    return tuple(TypeLabel(t.name, t.label, t.value) for t in gpu_types())
