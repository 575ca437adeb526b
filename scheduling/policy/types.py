"""GPU types (Kueue's flavors): which types a cluster has, which a job may
get, and each type's quota.

A cluster has types when a node names one (`Node.gpu_type`) or a quota
names a resource `gpu:<type>`; without, every GPU is of one kind and the
policy works on the resource `gpu` exactly as it always did.

With types:
- the cluster's order is `Snapshot.gpu_types` (cheapest first), then the
  types only nodes or quotas name, in the order they first appear;
- a team's GPU quota is per type: `gpu:a100` in `nominal`,
  `borrowing_limit` and `lending_limit` is that type's resource `gpu`. A
  team that names some type has a nominal of 0 in the others (it may only
  borrow them); a team that names none is limited by capacity alone, as a
  team whose quota does not name `gpu` is today. CPU and memory stay untyped;
- a job's candidate types are its `gpu_type` list, else the types its team
  names in the cluster's order, else every type. A job without GPUs has no
  type and goes on any node;
- a running job's GPUs count against its type's quota; a job without a
  `gpu_type` has the type of the first node holding its GPUs.

`TypedQuota` builds one `Team` per type whose `gpu` is that type's figure,
so quota.py's arithmetic (R2, R6, R7, R9, R10) applies to each type unchanged
and never lends, borrows or reclaims across types.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Node, PendingJob, RunningJob, Snapshot, Team

PREFIX = "gpu:"


def typed_key(name: str) -> str:
    """Returns the quota resource of a GPU type: "gpu:a100"."""
    return PREFIX + name


def type_of_key(key: str) -> str | None:
    """Returns the GPU type a quota resource names, or None for another resource."""
    return key[len(PREFIX):] if key.startswith(PREFIX) else None


def cluster_types(snapshot: Snapshot) -> tuple[str, ...]:
    """Returns the cluster's GPU types in its order (cheapest first); empty
    when the snapshot has no types."""
    order = list(snapshot.gpu_types)
    seen = set(order)
    named = [n.gpu_type for n in snapshot.nodes if n.gpu_type is not None]
    for team in snapshot.teams:
        for limits in (team.nominal, team.borrowing_limit, team.lending_limit):
            named.extend(t for t in map(type_of_key, limits) if t is not None)
    for name in named:
        if name not in seen:
            seen.add(name)
            order.append(name)
    return tuple(order)


def team_types(team: Team, order: tuple[str, ...]) -> tuple[str, ...]:
    """Returns the types a team's nominal names, in the cluster's order."""
    return tuple(t for t in order if typed_key(t) in team.nominal)


@dataclass(frozen=True, slots=True)
class Types:
    """The GPU types of one snapshot: names in the cluster's order, each
    schedulable node's type index (-1: none), and the quota teams of each type.

    `capacity` is each type's room on the schedulable nodes (R2's unassigned
    capacity); `ever` on every node, cordoned ones too, and `ever_kinds`
    each node's type: what R10 judges against.
    """

    names: tuple[str, ...]
    node_kinds: tuple[int, ...]
    teams: tuple[tuple[Team, ...], ...]
    capacity: tuple[tuple[int, int, int], ...]
    index: dict[str, int]  # name -> its place in `names`
    ever: tuple[tuple[int, int, int], ...] = ()
    ever_kinds: tuple[int, ...] = ()

    @classmethod
    def of(cls, snapshot: Snapshot, nodes: tuple[Node, ...] | None = None) -> Types | None:
        """Returns the snapshot's types, or None when it has none. Every
        node and quota names types; `node_kinds` and `capacity` are of
        `nodes`, the schedulable ones (default: all the snapshot's)."""
        names = cluster_types(snapshot)
        if not names:
            return None
        index = {name: k for k, name in enumerate(names)}
        teams = tuple(tuple(_team_of_type(team, name) for team in snapshot.teams)
                      for name in names)
        ever_kinds, ever = _kinds_and_capacity(snapshot.nodes, index, len(names))
        if nodes is None or len(nodes) == len(snapshot.nodes):
            return cls(names, ever_kinds, teams, ever, index, ever, ever_kinds)
        kinds, capacity = _kinds_and_capacity(nodes, index, len(names))
        return cls(names, kinds, teams, capacity, index, ever, ever_kinds)

    def candidates(self, job: PendingJob, team: Team) -> tuple[int | None, ...]:
        """Returns the type indices a pending job may get, in the order they
        are tried; (None,) for a job without GPUs. A name the cluster does
        not know is -1: nothing of it exists."""
        if not job.demand.total[0]:
            return (None,)
        names = job.gpu_type or team_types(team, self.names) or self.names
        return tuple(self.index.get(name, -1) for name in names)

    def running_kind(self, job: RunningJob, node_index: dict[str, int]) -> int | None:
        """Returns the type index a running job's GPUs count against, or None
        for a job without GPUs (or of a type the cluster no longer has).
        `node_index` places every node of the snapshot, those that take no
        new pods too (`ever_kinds`): a job naming no type that runs on a
        cordoned node still counts in its node's type's quota."""
        if not any(g.gpu for g in job.replicas):
            return None
        if job.gpu_type is not None:
            return self.index.get(job.gpu_type)
        k = 0
        for group in job.replicas:
            for _ in range(group.count):
                if group.gpu:
                    i = node_index.get(job.nodes[k])
                    kind = -1 if i is None else self.ever_kinds[i]
                    return None if kind < 0 else kind
                k += 1
        return None


def _kinds_and_capacity(nodes: tuple[Node, ...], index: dict[str, int], types: int
                        ) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
    """Returns each node's type index (-1: none) and each type's GPUs with
    the nodes' CPU and memory (untyped: the same for every type)."""
    kinds = tuple(index.get(n.gpu_type, -1) if n.gpu_type else -1 for n in nodes)
    cpu = sum(n.cpu for n in nodes)
    memory = sum(n.memory for n in nodes)
    capacity = tuple((sum(n.gpu for n, k in zip(nodes, kinds) if k == t), cpu, memory)
                     for t in range(types))
    return kinds, capacity


def _team_of_type(team: Team, name: str) -> Team:
    """Returns a team whose `gpu` quota is its quota of type `name`; a team
    naming some type and not this one has a nominal of 0 in it."""
    key = typed_key(name)
    names_types = any(type_of_key(k) for k in team.nominal)

    def of(limits: dict[str, int], nominal: bool) -> dict[str, int]:
        out = {k: v for k, v in limits.items() if type_of_key(k) is None and k != "gpu"}
        if key in limits:
            out["gpu"] = limits[key]
        elif nominal and names_types:
            out["gpu"] = 0
        return out

    return Team(team.name, of(team.nominal, True), of(team.borrowing_limit, False),
                of(team.lending_limit, False), team.weight, team.per_replica_max)
