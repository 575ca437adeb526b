"""The words for a quota figure left unset, kept here alone so that every place a person reads one says the same.

A borrowing limit not set reads "no limit" (the team may borrow as far as the cluster lets it), a lending limit
not set "all unused" (all of its unused nominal may be lent), a nominal not set "no quota" (the resource has no
quota row, limited by node capacity only). Who says them: the team pages and the quota page (through the
`unset_limit` template tag), the quota form's placeholders, the admin's quota columns, the quota what-if's
table of limits, the audit's summary of a quota change (the quota page's and the API's, and the admin's of a
quota row, `tenants.audit`) and the refusal of a stale quota edit (`quota_conflicts`), and the API's and the
model's help texts. A phrase changed here changes on all of them.
"""

from __future__ import annotations

from collections.abc import Callable

NO_QUOTA = "no quota"  # nominal not set: no quota row
NO_LIMIT = "no limit"  # borrowing limit, or most per replica, not set
ALL_UNUSED = "all unused"  # lending limit not set: all unused nominal may be lent
NO_DEFAULT = "none"  # default per replica not set

UNSET = {"nominal": NO_QUOTA, "borrowing_limit": NO_LIMIT, "lending_limit": ALL_UNUSED,
         "max_per_replica": NO_LIMIT, "default_per_replica": NO_DEFAULT}  # fmt: skip


def limit_text(field: str, value: int | None, shown: Callable[[int], str] = str) -> str:
    """Returns a quota `field`'s `value` as a person reads it: its words for unset when `value` is None ("no
    limit", "all unused"), else `shown(value)` ("8 GPUs" when `shown` says units, "8" by default)."""
    return UNSET[field] if value is None else shown(value)
