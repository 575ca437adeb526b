"""A cluster that fails on purpose: wraps another adapter and injects faults at chosen calls.

The fault-injection tests and the soak benchmark run the real loop and
reconcile through it, to show that no crash, timeout or refusal at any step
lets the loop over-admit, lose or duplicate a job.

A fault names the port call it hits and when: `before` (the call never reached
the cluster: a refused connection) or `after` (the cluster acted, then the
answer was lost or the worker died: a timeout, a killed process).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from scheduling.cluster.base import Cluster, ClusterError, ClusterJob, ClusterUnavailable, Tenants

CALLS = ("nodes", "outside_usage", "job_statuses", "check_create", "create_job", "suspend_job", "delete_job")


class Killed(BaseException):
    """The worker process died here: nothing after this point runs, and nothing records it.

    A BaseException, as a SIGKILL gives no handler a chance: `except Exception` in
    the loop does not catch it, and open transactions roll back.
    """


@dataclass
class Fault:
    call: str  # one of CALLS
    when: str = "before"  # "before" the cluster acts, or "after" it did
    error: type[BaseException] = ClusterUnavailable  # ClusterUnavailable, ClusterError or Killed
    nth: int = 1  # on the nth such call from now (1 = the next one)

    def __post_init__(self):
        if self.call not in CALLS or self.when not in ("before", "after"):
            raise ValueError(f"no such fault: {self.call} {self.when}")


@dataclass
class FaultyCluster:
    """Passes every call to `inner`, except where a fault is due; each fault fires once.

    With `rate` above zero it also fails any call at random (seeded), as a flaky
    API server does: half before the cluster acts, half after.
    """

    inner: Cluster
    faults: list[Fault] = field(default_factory=list)
    rate: float = 0.0
    seed: int = 0
    fired: list[str] = field(default_factory=list)  # "create_job after ClusterUnavailable", in order
    _seen: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self._random = random.Random(self.seed)

    def _due(self, call: str, when: str) -> BaseException | None:
        if when == "before":
            self._seen[call] = self._seen.get(call, 0) + 1
        for fault in self.faults:
            if fault.call == call and fault.when == when and fault.nth == self._seen[call]:
                self.faults.remove(fault)
                return self._fire(fault.error, call, when)
        if self.rate and (when == "before") == (self._random.random() < 0.5) and self._random.random() < self.rate:
            return self._fire(ClusterUnavailable, call, when)
        return None

    def _fire(self, error: type[BaseException], call: str, when: str) -> BaseException:
        self.fired.append(f"{call} {when} {error.__name__}")
        return error(f"injected: {call} failed {when} reaching the cluster")

    def _call(self, call: str, *args, **options):
        if (error := self._due(call, "before")) is not None:
            raise error
        answer = getattr(self.inner, call)(*args, **options)
        if (error := self._due(call, "after")) is not None:
            raise error
        return answer

    def nodes(self):
        return self._call("nodes")

    def outside_usage(self):
        return self._call("outside_usage")

    def job_statuses(self, **options):
        return self._call("job_statuses", **options)

    def check_create(self, job: ClusterJob) -> None:
        return self._call("check_create", job)

    def check_suspend(self, job: ClusterJob) -> None:
        return self._call("check_suspend", job)

    def create_job(self, job: ClusterJob) -> None:
        return self._call("create_job", job)

    def suspend_job(self, job: ClusterJob) -> None:
        return self._call("suspend_job", job)

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        return self._call("delete_job", namespace, name, kind)

    def outside_jobs(self):
        return self.inner.outside_jobs()

    def outside_job_here(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        return self.inner.outside_job_here(kind, namespace, name, uid)

    def mark_outside(self, job, *, job_id=None, rejected="", cancelled="", released=""):
        return self.inner.mark_outside(job, job_id=job_id, rejected=rejected, cancelled=cancelled, released=released)

    def trials(self, namespace: str):
        return self.inner.trials(namespace)

    def experiments(self, namespace: str):
        return self.inner.experiments(namespace)

    def claims(self, namespace: str):
        return self.inner.claims(namespace)

    def logs(self, namespace: str, job_id: int, **options):
        return self.inner.logs(namespace, job_id, **options)

    def log_stream(self, namespace: str, job_id: int, **options):
        return self.inner.log_stream(namespace, job_id, **options)

    def sync_tenants(self, tenants: Tenants) -> list[str]:
        return self.inner.sync_tenants(tenants)

    def doctor(self, tenants: Tenants):
        return self.inner.doctor(tenants)


__all__ = ["CALLS", "ClusterError", "ClusterUnavailable", "Fault", "FaultyCluster", "Killed"]
