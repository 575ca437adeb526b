"""What Gangway says when the cluster cannot be used: one sentence with where to look.

The commands that use the cluster (`cycle`, `doctor`, `sync_tenants`) say it, and so does the admission
loop, in its summary (the cycle's row, the worker's log, `manage.py cycle`) and on the jobs it leaves
queued: a refusal always points at the same RBAC rules.
"""

from __future__ import annotations

RBAC_RULES = "deploy/kubernetes/rbac.yaml"


def unreachable(error: Exception) -> str:
    """ "The cluster could not be reached: <why>. Check KUBECONFIG or the in-cluster service account." """
    return (f"The cluster could not be reached: {_clause(error)}. Check KUBECONFIG or the in-cluster "
            "service account.")  # fmt: skip


def refused(what: str, error: Exception, *, meanwhile: str = "") -> str:
    """ "The cluster refused <what>: <why>[; <meanwhile>]. Check the RBAC rules of Gangway's service account
    (...)." `meanwhile`: what happens until the rules allow it ("jobs stay queued")."""
    then = f"; {meanwhile}" if meanwhile else ""
    return (f"The cluster refused {what}: {_clause(error)}{then}. Check the RBAC rules of Gangway's service "
            f"account ({RBAC_RULES}).")  # fmt: skip


def _clause(error: Exception) -> str:
    """The error's message without its closing period, for a sentence that goes on after it."""
    return str(error).rstrip(". ")
