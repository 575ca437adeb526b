"""Which GPU type each node holds: the cluster's GPU types (tenants.GpuType) matched to node labels.

Read by the snapshot (each node's type for the policy), by the node mirror the
pages read, by the manifests (the label that pins a job to its type) and by
doctor (GPU nodes no type matches). On a cluster without GpuType rows every
answer is "no type", and everything reads as it did before types.
"""

from __future__ import annotations

from scheduling.cluster.base import TypeLabel
from scheduling.cluster.node_types import label_of, type_of, unlabelled
from tenants.selectors import gpu_types

# The pure matching of labels to types lives with the cluster port (the adapters' doctor reads it
# without the database); the snapshot, the node mirror and the previews import it from here.
__all__ = ["TypeLabel", "known_types", "label_of", "type_of", "unlabelled"]


def known_types() -> tuple[TypeLabel, ...]:
    """Returns the cluster's GPU types, cheapest first; empty when it has none."""
    return tuple(TypeLabel(t.name, t.label, t.value) for t in gpu_types())
