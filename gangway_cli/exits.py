"""The exit codes of `gangway`: one registry, read by the help texts, the README's table and the commands.

CI scripts branch on these numbers, so a code keeps its meaning once published: 0 to 3 are the
codes the CLI always had; 4 to 7 split what used to be 1 or 2 ("the job failed" or "usage")
by what the caller should do next.
"""

from __future__ import annotations

from gangway_cli.client import UNTRUSTED

OK = 0
JOB_FAILED = 1
USAGE = 2
TIMEOUT = 3
AUTH = 4
NOT_FOUND = 5
REFUSED = 6
UNAVAILABLE = 7
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
TERMINATED = 143  # 128 + SIGTERM: what CI expects of a step it cancelled

MEANINGS = {
    OK: "success",
    JOB_FAILED: "the job failed, was cancelled or rejected, or can never fit",
    USAGE: "a usage error: a bad option, no URL or token, an unreadable file, a URL the token may not go to, "
    "that redirects or whose certificate does not verify (SSL_CERT_FILE names a CA to trust)",
    TIMEOUT: "--timeout passed while waiting; the job keeps going",
    AUTH: "the server refused the token: unknown, revoked or expired, or not allowed to do this (HTTP 401, 403)",
    NOT_FOUND: "no such job among those you can see (HTTP 404)",
    REFUSED: "the server refused the request: an invalid spec (its field errors listed), a conflict, "
    "a full queue (another 4xx)",
    UNAVAILABLE: "the server could not be reached, or still answered 5xx or 429 after retries: try again later",
    INTERRUPTED: "interrupted (Ctrl-C)",
    TERMINATED: "terminated (SIGTERM, as when CI cancels the step)",
}


def for_status(status: int) -> int:
    """The exit code for the status of an answer the client raised ApiError for; 0 is a server out of reach,
    UNTRUSTED a certificate that does not verify."""
    if status == UNTRUSTED:
        return USAGE
    if status in (401, 403):
        return AUTH
    if status == 404:
        return NOT_FOUND
    if status in (0, 429) or status >= 500:
        return UNAVAILABLE
    if 200 <= status < 400:  # a redirect, or a page that is not JSON: GANGWAY_URL is not the API's own address
        return USAGE
    return REFUSED


def epilog(*codes: int) -> str:
    """'Exit codes:' and one line per code, for a command's --help."""
    return "Exit codes:\n" + "\n".join(f"  {code:>3}  {MEANINGS[code]}" for code in codes)
