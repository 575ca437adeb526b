"""Tokens a running job uses to report its own progress: scoped to one job and one action.

A token is signed with the portal's SECRET_KEY (nothing is stored, no
Kubernetes Secret is made) and carries the job's id and the one action it
allows. Gangway puts it in the job's pods as GANGWAY_JOB_TOKEN, beside
GANGWAY_URL. It is refused by every other endpoint (they know only API
tokens), for any other job, once tampered with, and after JOB_TOKEN_MAX_AGE.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

PREFIX = "gjt_"  # told apart from API tokens at a glance
SALT = "gangway.job-token"
CHECKPOINT = "checkpoint"


class BadJobToken(Exception):
    """The token is not one Gangway issued for this job and action, or it has expired."""


def issue(job_id: int, action: str = CHECKPOINT) -> str:
    """Returns a token that lets its bearer do `action` for job `job_id`, and nothing else."""
    return PREFIX + signing.dumps({"job": job_id, "do": action}, salt=SALT, compress=True)


def verify(token: str, job_id: int, action: str = CHECKPOINT) -> None:
    """Returns nothing when `token` allows `action` on `job_id`; raises BadJobToken saying why not."""
    if not token.startswith(PREFIX):
        raise BadJobToken("Not a job token; a running job sends its GANGWAY_JOB_TOKEN.")
    try:
        claims = signing.loads(token[len(PREFIX):], salt=SALT, max_age=settings.JOB_TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        raise BadJobToken("This job token has expired; the job's next attempt gets a new one.") from None
    except signing.BadSignature:
        raise BadJobToken("This job token was not issued by Gangway, or was changed.") from None
    if claims.get("job") != job_id or claims.get("do") != action:
        raise BadJobToken(f"This job token is not for reporting a {action} of job {job_id}.")
