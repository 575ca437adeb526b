"""The policy's vocabulary: a frozen snapshot in, a frozen plan out.

Resources are integers: GPUs, CPU in millicores, memory in bytes. A missing
resource in a request or on a node means zero. Time is integer seconds on the
snapshot's own clock (`Snapshot.now`); the policy never reads the wall clock.

Everything here is used by the admission loop, the `plan` command, the fit
preview of the submit form and the trace replay, so the shapes are the contract
between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .demand import Demand, demand_of

RESOURCES: tuple[str, ...] = ("gpu", "cpu", "memory")


def id_order(id: str) -> tuple[bool, int, str]:
    """Returns the sort key of a job id where a rule orders by id (R3, R8):
    ids of digits alone (the loop's) go by their number, "99" before "100";
    other ids go after those, as text."""
    return (False, len(id), id) if id.isascii() and id.isdigit() else (True, 0, id)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpu: int = 0
    cpu: int = 0
    memory: int = 0
    # The GPU type of its GPUs (types.py); None on a cluster without types.
    gpu_type: str | None = None
    # False for a node that takes no new pods (cordoned, or tainted against
    # Gangway's pods): it counts only for what R10 asks, whether a job could
    # ever fit; placement, free room, quota, reservations and estimates see
    # the schedulable nodes alone (state.py). `unschedulable` says why, in
    # words ("cordoned", "tainted maintenance"); "" when it is not known.
    schedulable: bool = True
    unschedulable: str = ""


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    value: int
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class Team:
    """A team's quota. Quota covers only the resources `nominal` names.

    `borrowing_limit`: a missing resource means no limit (0 = never borrow).
    `lending_limit`: a missing resource means all unused nominal may be lent.
    `per_replica_max`: LimitRange-like limit on one replica; missing = none.
    """

    name: str
    nominal: dict[str, int] = field(default_factory=dict)
    borrowing_limit: dict[str, int] = field(default_factory=dict)
    lending_limit: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0
    per_replica_max: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplicaGroup:
    count: int
    gpu: int = 0
    cpu: int = 0
    memory: int = 0


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding resources: running, or admitted and starting.

    `team` None is outside usage (R12): it takes node capacity, counts against
    no quota and is never a victim; its `tier` is then None too. `nodes` names
    the node of each replica, in the order the replica groups expand; a node
    the snapshot does not list (drained) holds no room but the usage still
    counts against quota. A `stopping` job is never a victim (R8).
    """

    id: str
    team: str | None
    tier: str | None
    started: int
    replicas: tuple[ReplicaGroup, ...]
    nodes: tuple[str, ...]
    max_runtime: int | None = None
    # When it first queued; a victim requeues with it (R3). None: `started`.
    queued: int | None = None
    # R14: the learned runtime the loop puts in the snapshot; None: unknown.
    estimate: int | None = None
    # R8: when it last reported a checkpoint; None: it never did.
    checkpointed: int | None = None
    # The GPU type it got, its GPUs charged to `gpu:<type>`; None: the type
    # of the first node holding its GPUs, or no type on a cluster without.
    gpu_type: str | None = None
    # Being preempted already, and the cluster refuses, or fails, to stop it: it still
    # holds its room and counts in its team's quota, but is never a victim
    # again (choosing it would free nothing).
    stopping: bool = False


@dataclass(frozen=True, slots=True)
class PendingJob:
    id: str
    team: str
    tier: str
    queued: int
    replicas: tuple[ReplicaGroup, ...]
    max_runtime: int | None = None
    # R14: the learned runtime the loop puts in the snapshot; None: unknown.
    estimate: int | None = None
    # The GPU types it accepts, in order of preference; empty: its team's
    # types in the cluster's order (types.py).
    gpu_type: tuple[str, ...] = ()
    # What the policy computes with, derived once per job, not per cycle:
    # its demand, and its id's place where R3 orders by id (`id_order`).
    demand: Demand = field(init=False, repr=False, compare=False)
    order: tuple[bool, int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "demand", demand_of(self.replicas))
        object.__setattr__(self, "order", id_order(self.id))


# R4's two guards against starvation: reservations with backfill (the rule the
# loop runs), or the older whole-cluster hold kept for comparison in the replay.
GUARDS: tuple[str, ...] = ("reserve", "hold")


@dataclass(frozen=True, slots=True)
class Settings:
    """Policy settings, times in seconds.

    `starvation_guard` "reserve" is R4 as the loop runs it; "hold" is the
    older guard, where a job starved for room holds the whole cluster and
    nothing reserves room (the replay's `gangway-hold`).
    """

    starvation_after: int = 1800
    min_runtime_before_preemption: int = 600
    default_runtime: int = 86400
    max_reservations: int = 1
    reservation_slack: int = 600
    starvation_guard: str = "reserve"


@dataclass(frozen=True, slots=True)
class Reservation:
    """Room held for a starving job (R4): from `start`, `placement` maps
    node -> replicas, in snapshot node order. The plan lists them; the next
    snapshot carries them back so a reservation keeps its nodes."""

    id: str
    start: int
    placement: tuple[tuple[str, int], ...]
    # The node of each replica, in the order the replica groups expand (as
    # `Admission.nodes`): what each node holds where groups differ in size.
    # Empty in a reservation read back from a snapshot.
    nodes: tuple[str, ...] = ()
    # The GPU type the room is of; None on a cluster without types.
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: int
    nodes: tuple[Node, ...]
    tiers: tuple[Tier, ...]
    teams: tuple[Team, ...]
    running: tuple[RunningJob, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    settings: Settings = Settings()
    # The reservations of the previous plan (R4).
    reservations: tuple[Reservation, ...] = ()
    # The cluster's GPU types, cheapest first; empty: in the order the nodes
    # name them (types.py).
    gpu_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Admission:
    """Admit `id` with `placement` (node -> replicas, in snapshot node order).

    With `victims`, the job starts once those jobs have stopped.
    """

    id: str
    placement: tuple[tuple[str, int], ...]
    victims: tuple[str, ...] = ()
    # The node of each replica, in the order the replica groups expand; needed
    # where groups differ in size (a PS without GPUs beside GPU workers).
    nodes: tuple[str, ...] = ()
    # The GPU type it was given; None on a cluster without types.
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """A waiting job: why (`code` stable, `reason` a sentence), where, when.

    `eta` is the estimated start in snapshot seconds, None when unknown.
    """

    id: str
    position: int
    team_position: int
    code: str
    reason: str
    eta: int | None = None


@dataclass(frozen=True, slots=True)
class Rejection:
    id: str
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class TeamGpus:
    """A team's GPUs once the plan's admissions count (usage.py says how each
    figure is computed): used, within nominal, borrowed above it, lent to
    borrowers, idle, and asked by its waiting jobs."""

    team: str
    nominal: int
    used: int
    within: int
    borrowed: int
    lent: int
    idle: int
    waiting: int
    # (lender, GPUs) in snapshot team order; what is not listed comes from unassigned capacity.
    borrowed_from: tuple[tuple[str, int], ...] = ()
    # On a cluster with GPU types: (type, the team's figures of that type) in the cluster's
    # order, which the figures above add up; () on a cluster without types.
    by_type: tuple[tuple[str, TeamGpus], ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    admit: tuple[Admission, ...] = ()
    wait: tuple[Wait, ...] = ()
    reject: tuple[Rejection, ...] = ()
    # R4: room held for starving jobs, in the shape the next snapshot takes back.
    reservations: tuple[Reservation, ...] = ()
    # Each team's GPU figures after the admissions, in snapshot team order.
    teams: tuple[TeamGpus, ...] = ()
