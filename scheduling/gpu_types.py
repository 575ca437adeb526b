"""Which GPU type each node holds: the cluster's GPU types (tenants.GpuType) matched to node labels.

Read by the snapshot (each node's type for the policy), by the node mirror the
pages read, by the manifests (the label that pins a job to its type) and by
doctor (GPU nodes no type matches). On a cluster without GpuType rows every
answer is "no type", and everything reads as it did before types.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.base import NodeInfo
from tenants.selectors import gpu_types


@dataclass(frozen=True, slots=True)
class TypeLabel:
    """One GPU type as the cluster tells it: its nodes carry `label` = `value`."""

    name: str
    label: str
    value: str


def known_types() -> tuple[TypeLabel, ...]:
    """Returns the cluster's GPU types, cheapest first; empty when it has none."""
    return tuple(TypeLabel(t.name, t.label, t.value) for t in gpu_types())


def type_of(node: NodeInfo, types: tuple[TypeLabel, ...]) -> str:
    """Returns the name of the type whose label the node carries, or "" for a node without
    GPUs, on a cluster without types, or whose labels match no type."""
    if not node.gpu or not types:
        return ""
    labels = dict(node.labels)
    return next((t.name for t in types if labels.get(t.label) == t.value), "")


def unlabelled(nodes: list[NodeInfo], types: tuple[TypeLabel, ...]) -> list[NodeInfo]:
    """Returns the GPU nodes no type matches, when the cluster has types: no job can be placed on them."""
    return [node for node in nodes if types and node.gpu and not type_of(node, types)]


def label_of(name: str, types: tuple[TypeLabel, ...]) -> tuple[str, str] | tuple[()]:
    """Returns the node label (key, value) that pins pods to type `name`; () for "" or an unknown type."""
    return next(((t.label, t.value) for t in types if t.name == name), ())
