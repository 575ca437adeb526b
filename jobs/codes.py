"""Reason codes the portal gives itself, beside the policy's own (`scheduling.policy.Code`).

A job's `reason_code` and an event's `code` hold one of these or a policy code;
pages, the API, `/metrics` and reconcile compare them through these names, never
through bare strings.
"""

from __future__ import annotations

from enum import StrEnum


class Because(StrEnum):
    NEW = "new"  # submitted, waiting for its first cycle
    ADMITTED = "admitted"
    RECLAIMED = "reclaimed"  # R6: another team takes back its nominal quota
    PREEMPTED = "preempted"  # R5: a higher tier of the same team
    CLUSTER_UNREACHABLE = "cluster_unreachable"
    CREATE_PENDING = "create_pending"  # admitted, not yet created: the cluster did not answer
    CLUSTER_REFUSED = "cluster_refused"  # the cluster refused the create: requeued with a backoff, failed at last
    CLUSTER_FAILING = "cluster_failing"  # the create met a server error (a 500): requeued with a backoff, never failed
    MISSING_CLAIM = "missing_claim"  # mounts a claim its namespace lacks: left out of the plan until it exists
    TIER_NOT_ALLOWED = "tier_not_allowed"  # its team may no longer use its tier: left out of the plan until it may
    STOP_REFUSED = "stop_refused"  # the cluster refused to suspend or stop a job: deleted instead, or tried again
    # A job it would preempt (or did) could not be stopped: it waits with a backoff, and is never failed for it.
    VICTIM_REFUSED = "victim_refused"
    RUNS_ON = "runs_on"  # the cluster refused to stop a victim for ADMISSION_TIMEOUT: it runs on, in its quota
    # Found running without an admission: suspended; until then it waits, left out of the plan.
    NOT_ADMITTED = "not_admitted"
    # A job being cancelled that the cluster reports ended on its own: it succeeds or fails as it did; nothing stopped.
    ENDED_BEFORE_CANCEL = "ended_before_cancel"
    ENDED_HERE = "ended_here"  # ended in Gangway (e.g. cancelled) yet still running in the cluster: stopped
    # A running job's object deleted or suspended outside Gangway: created again, or resumed, on its nodes.
    CREATED_AGAIN = "created_again"
    REQUEUED = "requeued"  # stopped for a preemption: back in the queue
    STUCK_ADMISSION = "stuck_admission"  # R13: its pods did not all start in time
    # R13 for a running job: a replica's pod waits to start again (lost with its node, made again, taken by no node);
    # its reason while it waits, and its eviction once it has waited ADMISSION_TIMEOUT.
    SHORT_OF_REPLICAS = "short_of_replicas"
    BACKOFF = "backoff"  # R13: requeued, waiting out its backoff
    DELETED_OUTSIDE = "deleted_outside"  # an adopted job deleted in the cluster: cancelled in Gangway
    # A running adopted job whose owner suspended its object in the cluster: cancelled in Gangway, never resumed,
    # its object its owner's again (as a deleted one's).
    SUSPENDED_OUTSIDE = "suspended_outside"
    # A Katib trial's job gone from the cluster while its namespace's Trials cannot be read: how its trial ended
    # is unknown, and it is cancelled as deleted if they still cannot be read after a while.
    TRIAL_UNREAD = "trial_unread"
    # An adopted job whose owner changed what it asks (replicas, GPUs, CPU, memory) before it was admitted:
    # rejected, never unsuspended asking more than Gangway counted.
    CHANGED_OUTSIDE = "changed_outside"
    # An adopted job that ended here (rejected, cancelled) marked Failed in the cluster: what waits on it ends.
    MARKED_FAILED = "marked_failed"
    FIELDS_KEPT = "fields_kept"  # an adopted job has fields Gangway does not read: they stay as written
