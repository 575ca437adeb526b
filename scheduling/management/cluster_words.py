"""What the commands that use the cluster say when it cannot be used: one sentence with where to look."""

from __future__ import annotations

RBAC_RULES = "deploy/kubernetes/rbac.yaml"


def unreachable(error: Exception) -> str:
    """ "The cluster could not be reached: <why>. Check KUBECONFIG or the in-cluster service account." """
    return (f"The cluster could not be reached: {_clause(error)}. Check KUBECONFIG or the in-cluster "
            "service account.")  # fmt: skip


def refused(what: str, error: Exception) -> str:
    """ "The cluster refused <what>: <why>. Check the RBAC rules of Gangway's service account (...)." """
    return f"The cluster refused {what}: {_clause(error)}. Check the RBAC rules of Gangway's service account ({RBAC_RULES})."


def _clause(error: Exception) -> str:
    """The error's message without its closing period, for a sentence that goes on after it."""
    return str(error).rstrip(". ")
