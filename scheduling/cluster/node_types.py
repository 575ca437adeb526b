"""Which GPU type a node holds, told by its labels: pure functions of nodes and the cluster's types.

`scheduling.gpu_types` reads the types from the database and offers these to the snapshot, the
node mirror and the previews; the adapters' doctor reads them here, with the types the port's
`Tenants` carries, so no adapter reads the database. Without types every answer is "no type".
"""

from __future__ import annotations

from scheduling.cluster.base import Finding, NodeInfo, Tenants, TypeLabel


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


def type_findings(nodes: list[NodeInfo], tenants: Tenants) -> list[Finding]:
    """Returns doctor's findings on the schedulable `nodes` against the cluster's GPU types; empty without types.

    A GPU node whose labels match no type is a problem: the policy places no job there, so its
    GPUs sit idle. It is named with the value it carries of each label the types read. Nominal
    quotas of a type adding up to more than the GPUs of that type's nodes are a problem: the sum
    over types can fit the cluster while one type's guarantees cannot be kept. A type no node
    carries is a note: jobs that accept only it wait, the rest run.
    """
    types = tenants.gpu_types
    if not types:
        return []
    findings = []
    keys = sorted({t.label for t in types})
    strays = unlabelled(nodes, types)
    if strays:
        seen = "; ".join(f"{node.name} ({_seen(node, keys)})" for node in strays)
        expected = ", ".join(f"{t.label}={t.value} for {t.name}" for t in types)
        findings.append(Finding(
            f"{len(strays)} GPU node(s) match no GPU type, so no job is ever placed on their "
            f"{sum(node.gpu for node in strays)} GPUs: {seen}.",
            f"Label each with its type ({expected}), or add a GPU type for the value it carries.",
        ))  # fmt: skip
    carried = {type_of(node, types) for node in nodes}
    for t in types:
        nominal = sum(team.type_nominal.get(t.name, 0) for team in tenants.teams)
        held = sum(node.gpu for node in nodes if type_of(node, types) == t.name)
        if nominal > held:
            findings.append(Finding(
                f"Nominal {t.name} GPU quotas add up to {nominal} but the schedulable {t.name} nodes have "
                f"{held}, so not every team can get its guaranteed share of {t.name}.",
                f"Lower the nominal gpu:{t.name} quotas, or add or label {t.name} nodes "
                f"({t.label}={t.value}).",
            ))  # fmt: skip
    for t in types:
        if t.name not in carried:
            findings.append(Finding(
                f"No schedulable GPU node carries {t.label}={t.value}, so jobs that accept only GPU type {t.name} "
                "wait until one does.",
                f"Label the {t.name} nodes {t.label}={t.value} (or uncordon them), or delete GPU type {t.name} "
                "if the cluster has none.",
                blocking=False,
            ))  # fmt: skip
    return findings


def _seen(node: NodeInfo, keys: list[str]) -> str:
    """What a node carries of each label the types read: "nvidia.com/gpu.product=Tesla-T4", or "no <key> label"."""
    labels = dict(node.labels)
    return ", ".join(f"{key}={labels[key]}" if key in labels else f"no {key} label" for key in keys)
