"""The admission policy: a pure function from a snapshot to a plan.

Imports only the standard library and the shared core beneath it, which
imports only the standard library too (tests/policy/test_policy_imports.py
and tests/core check it).
The loop, the `plan` command, the submit form's fit preview and the trace
replay all call `plan`. Its modules run compiled with mypyc when a build
matches them (native.py), interpreted otherwise: the plans are the same.
"""

from .native import load

load(__path__)  # the policy compiled with mypyc, when a build matches these sources

from .cycle import Fit, plan
from .io import SnapshotError, plan_to_dict, snapshot_from_dict, team_gpus_to_dict
from .model import (
    Admission, Node, PendingJob, Plan, Rejection, ReplicaGroup, Reservation, RunningJob,
    Settings, Snapshot, Team, TeamGpus, Tier, Wait,
)
from .reasons import Code
from .standing import Standing

__all__ = [
    "Admission", "Code", "Fit", "Node", "PendingJob", "Plan", "Rejection", "ReplicaGroup",
    "Reservation", "RunningJob", "Settings", "Snapshot", "SnapshotError", "Standing", "Team",
    "TeamGpus", "Tier", "Wait", "plan", "plan_to_dict", "snapshot_from_dict", "team_gpus_to_dict",
]
