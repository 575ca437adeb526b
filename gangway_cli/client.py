"""A small HTTP client for Gangway's REST API on urllib: JSON in and out, retries where they are safe."""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone

USER_AGENT = "gangway-cli/1"
RETRY_STATUSES = {429, 502, 503, 504}
TIMEOUT = 30.0  # seconds to connect, and for each read of the answer
RETRIES = 4  # after the first attempt: 5 in all
MAX_WAIT = 60.0  # the longest Retry-After waited for; a server asking for longer is reported, not waited on
BACKOFF_CAP = 20.0
CHUNK = 64 * 1024  # bytes of a download read and written at a time
# A download read on from a line starts once the portal has read the log up to that line again, which may take
# the whole of its time bound (40 s): a download's reads wait this many times as long as other requests'.
DOWNLOAD_WAIT = 2
# The status of an ApiError for a portal whose certificate does not verify (0 is a portal out of reach): no
# answer came, and none will by trying again, so it exits as a configuration error (`exits.for_status`).
UNTRUSTED = -1
# OpenSSL's verify codes of a certificate whose issuer is not trusted here: a self-signed one, or one a
# company's own CA signed. SSL_CERT_FILE names the CA to trust.
_UNKNOWN_ISSUER = {2, 18, 19, 20, 21}  # unable to get issuer; self-signed, or one in the chain; no local issuer
_NOT_ITS_NAME = {62, 64}  # hostname or IP address mismatch
# The portal says when the token expires (RFC 3339, UTC) on every answer to a token that will; within this many
# days the client warns, once, on standard error.
EXPIRES_HEADER = "Gangway-Token-Expires"
EXPIRY_WARNING_DAYS = 14


class ApiError(Exception):
    """The server answered with an error, or could not be reached (status 0). The message is one line."""

    def __init__(self, status: int, body: object, message: str):
        self.status, self.body = status, body
        super().__init__(message)


@dataclass
class Response:
    status: int
    body: object
    headers: dict = field(default_factory=dict)


def one_line(text: str, limit: int = 1000) -> str:
    """`text` with its whitespace runs (newlines included) as one space and control characters dropped,
    so that what a server or proxy sends can neither split an error over lines nor drive the terminal."""
    text = "".join(char if char.isprintable() or char.isspace() else "" for char in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(body: object) -> str:
    """A DRF error body as one line: its detail, or each field's messages ("name: Must be...; replicas: Required.")."""
    if isinstance(body, dict):
        if "detail" in body and len(body) <= 3:
            return one_line(str(body["detail"]))
        return one_line(_joined(_field_messages(body)))
    if isinstance(body, list):  # DRF's shape for a ValidationError raised with a list
        return one_line(_joined(_field_messages(body)))
    return "" if body is None else one_line(str(body))


def _joined(messages: list[str]) -> str:
    """Sentences as one, each but the last without its full stop: "name: Must be a DNS label; image: Required."."""
    messages = [message.strip() for message in messages]
    return "; ".join([message.removesuffix(".") for message in messages[:-1]] + messages[-1:])


def _field_messages(errors: object, where: str = "") -> list[str]:
    """Each message of a DRF error body, prefixed by the path of its field ("replicas.0.gpu: ...")."""
    if isinstance(errors, dict):
        items = [(str(key), value) for key, value in errors.items()]
    elif isinstance(errors, list) and any(isinstance(item, (dict, list)) for item in errors):
        items = [(str(index), item) for index, item in enumerate(errors)]
    else:
        prefix = "" if where in ("", "non_field_errors") else f"{where}: "
        return [f"{prefix}{message}" for message in (errors if isinstance(errors, list) else [errors])]
    return [line for key, value in items
            for line in _field_messages(value, f"{where}.{key}" if where and key != "non_field_errors" else where or key)]  # fmt: skip


def pause(seconds: float) -> None:
    """The client's wait between attempts (tests put their own in its place)."""
    time.sleep(seconds)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect comes back as an HTTPError: urllib would otherwise send the token on to wherever it
    points (it keeps Authorization across hosts and from https to http) and turn a POST into a GET."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Client:
    def __init__(self, url: str, token: str, *, timeout: float | None = None, retries: int | None = None,
                 max_wait: float | None = None, sleep=None, rng: random.Random | None = None,
                 warn=None):  # fmt: skip
        self.base = url.rstrip("/") + "/"
        # Told, once, a sentence to show the person (`expiry_warning`); None says nothing.
        self.warn = warn
        self._warned = False
        self.token = token
        self.timeout = TIMEOUT if timeout is None else timeout
        self.retries = RETRIES if retries is None else retries
        self.max_wait = MAX_WAIT if max_wait is None else max_wait
        self.sleep = sleep or pause
        # Jitter spreads out the retries of many clients that failed together (a deploy, a proxy
        # restart on a busy Monday), so they do not come back in step.
        self.rng = rng or random.Random()
        self.opener = urllib.request.build_opener(_RefuseRedirects)

    def url(self, path: str, query: dict | None = None) -> str:
        url = urllib.parse.urljoin(self.base, path.lstrip("/"))
        return f"{url}?{urllib.parse.urlencode(query)}" if query else url

    def request(self, method: str, path: str, *, data: bytes | None = None, content_type: str = "application/json",
                query: dict | None = None, headers: dict | None = None, retry: bool | None = None,
                deadline: float | None = None, into=None, check=None,
                read_timeout: float | None = None) -> Response:  # fmt: skip
        """The server's answer; raises ApiError for 3xx/4xx/5xx, for an answer that is not JSON, and for a
        server out of reach. With `into` (a binary file), a 2xx answer's text is copied into it as it
        comes rather than read as JSON (`download`), and the answer's body is its last bytes; `check`, when
        given, is called with its headers before anything is written, and may raise to refuse it.
        `read_timeout` takes the place of the client's timeout for this request.

        GETs, and writes the caller marks safe to repeat (an idempotency key, or an operation the
        server treats as done when done twice), are retried on connection errors, answers cut
        short, timeouts, 429 (after its Retry-After, when that is at most `max_wait`) and 502-504,
        with jittered exponential backoff, at most `retries` times. Every attempt sends the same
        headers, so a submission's Idempotency-Key is the same on each.

        With a `deadline` (a time.monotonic() value), no wait between attempts reaches past it (the
        last error is raised instead) and each attempt's socket timeout is at most the time left
        (a tenth of a second at the least), so the whole request ends by about then.
        """
        retry = method == "GET" if retry is None else retry
        all_headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "User-Agent": USER_AGENT}
        if data is not None:
            all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        attempts = self.retries + 1 if retry else 1
        for attempt in range(1, attempts + 1):
            request = urllib.request.Request(self.url(path, query), data=data, method=method, headers=all_headers)
            timeout = self.timeout if read_timeout is None else read_timeout
            timeout = timeout if deadline is None else max(0.1, min(timeout, deadline - time.monotonic()))
            try:
                with self.opener.open(request, timeout=timeout) as answer:
                    self._note_expiry(answer.headers)
                    if into is not None:
                        # Read before anything is written, so that a failure up to here is retried as any read.
                        first = answer.read(CHUNK)
                        if not first and answer.length:
                            raise http.client.IncompleteRead(b"", answer.length)
                        if check is not None:
                            check(answer.headers)
                        return Response(answer.status, self._copy(answer, first, into), dict(answer.headers))
                    status, raw, answer_headers = answer.status, answer.read(), dict(answer.headers)
            except urllib.error.HTTPError as error:
                self._note_expiry(error.headers)
                body = _json(_read(error))
                if error.code in RETRY_STATUSES and attempt < attempts:
                    wait = self._wait(error.headers.get("Retry-After"), attempt)
                    if wait is not None and _in_time(wait, deadline):
                        self.sleep(wait)
                        continue
                raise ApiError(error.code, body, self._error_text(error, body, attempt)) from None
            except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out, cut short, TLS
                if isinstance(getattr(error, "reason", error), ssl.SSLCertVerificationError):
                    raise ApiError(UNTRUSTED, None, self._certificate_text(getattr(error, "reason", error))) from None
                wait = self._backoff(attempt)
                if attempt < attempts and _in_time(wait, deadline):
                    self.sleep(wait)
                    continue
                tries = f" ({attempt} attempts)" if attempt > 1 else ""
                raise ApiError(0, None, f"Cannot reach {self.base}: {_reason(error)}{tries}.") from None
            body = _json(raw)
            if raw and not isinstance(body, (dict, list)):
                raise ApiError(status, body, f"{self.base} answered HTTP {status} with something other than "
                               "JSON; is that the portal's address?")  # fmt: skip
            return Response(status, body, answer_headers)
        raise AssertionError("unreachable")

    def _note_expiry(self, headers) -> None:
        """Warns once when the portal says the token expires within EXPIRY_WARNING_DAYS."""
        if self.warn is None or self._warned or headers is None:
            return
        sentence = expiry_warning(headers.get(EXPIRES_HEADER), self.token, now=datetime.now(timezone.utc))
        if sentence:
            self._warned = True
            self.warn(sentence)

    def get(self, path: str, *, deadline: float | None = None, **query) -> object:
        query = {name: value for name, value in query.items() if value is not None}
        return self.request("GET", path, query=query, deadline=deadline).body

    def download(self, path: str, into, *, check=None, **query) -> bytes:
        """Copies the text a GET answers (a whole log) into `into`, a binary file, CHUNK bytes at a time as it
        comes, and returns its last bytes (at most CHUNK). `check` is called with the answer's headers before
        anything is written; what it raises is raised as it is.

        Raises ApiError as `request` does. The request is retried as a GET is until its first bytes came,
        never after (what was written would be written again): an answer cut short midway raises ApiError
        (status 0) saying how much was written. An error writing `into` (a closed pipe) is raised as it is.
        """
        query = {name: value for name, value in query.items() if value is not None}
        try:
            return self.request("GET", path, query=query, headers={"Accept": "text/plain, application/json"},
                                into=into, check=check, read_timeout=self.timeout * DOWNLOAD_WAIT).body  # fmt: skip
        except _Unwritten as failed:
            raise failed.error from None

    def _copy(self, answer, first: bytes, into) -> bytes:
        """The rest of `answer` after `first`, written into `into` with `first`; returns the last bytes written."""
        kind = answer.headers.get_content_type()
        if kind != "text/plain":
            raise ApiError(answer.status, None, f"{self.base} answered HTTP {answer.status} with {one_line(kind, 80)}, "
                           "not a log; is that the portal's address?")  # fmt: skip
        chunk, written, last = first, 0, b""
        while chunk:
            try:
                into.write(chunk)
            except OSError as error:  # not the server's: kept apart from the errors that retry a request
                raise _Unwritten(error) from None
            written, last = written + len(chunk), (last + chunk)[-CHUNK:]
            try:
                chunk = answer.read(CHUNK)
                if not chunk and answer.length:  # a read of some bytes ends quietly where its length is short
                    raise http.client.IncompleteRead(b"", answer.length)
            except (OSError, http.client.HTTPException) as error:
                raise ApiError(0, None, f"The server stopped sending after {written:,} bytes "
                               f"({_reason(error)}).") from None  # fmt: skip
        return last

    def _certificate_text(self, error: ssl.SSLCertVerificationError) -> str:
        """What is wrong with the portal's certificate and what to set, as one line."""
        said = one_line(error.verify_message or error.reason or str(error), 200)
        where = urllib.parse.urlsplit(self.base).hostname
        if error.verify_code in _UNKNOWN_ISSUER:
            return (f"The certificate of {self.base} does not verify ({said}): set SSL_CERT_FILE to a PEM file "
                    "of the CA that signed it (your organisation's own CA), which the command then trusts "
                    "instead of the system's.")  # fmt: skip
        if error.verify_code in _NOT_ITS_NAME:
            return (f"The certificate of {self.base} is not for {where} ({said}): set GANGWAY_URL to a name "
                    "the certificate was issued for.")  # fmt: skip
        return f"The certificate of {self.base} does not verify ({said}); trying again will not mend it."

    def _backoff(self, attempt: int) -> float:
        """Seconds before attempt `attempt + 1`: about 1, 2, 4, 8 s (up to BACKOFF_CAP), each between half and all of it."""
        return min(BACKOFF_CAP, 2.0 ** (attempt - 1)) * self.rng.uniform(0.5, 1.0)

    def _wait(self, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before retrying: the server's Retry-After, else the backoff; None when the
        server asks for longer than `max_wait` (the caller reports it rather than hang)."""
        asked = _retry_after(retry_after)
        if asked is None:
            return self._backoff(attempt)
        return asked if asked <= self.max_wait else None

    def _error_text(self, error: urllib.error.HTTPError, body: object, attempt: int) -> str:
        said = describe(body) if isinstance(body, (dict, list)) else ""  # an HTML page from a proxy says nothing useful
        status = f"HTTP {error.code} {one_line(str(error.reason or ''), 80)}".rstrip()
        if 300 <= error.code < 400:
            where = one_line(error.headers.get("Location") or "elsewhere", 300)
            return f"{self.base} redirects to {where} ({status}); set GANGWAY_URL to the portal's own address."
        if error.code in RETRY_STATUSES:
            asked = _retry_after(error.headers.get("Retry-After"))
            later = f"; it asks to wait {asked:.0f} s" if asked is not None and asked > self.max_wait else ""
            tries = f", {attempt} attempts" if attempt > 1 else ""
            if error.code == 429:  # DRF's sentence names whose budget ran out
                return f"{said or 'Too many requests.'} ({status}{tries}{later})"
            return f"The server is unavailable ({status}{tries}){later}: {said or 'try again later.'}"
        return f"{said} ({status})" if said else status


class _Unwritten(Exception):
    """Writing a download failed (standard output closed): carries the OSError through `request`, which would
    take it for the server's and try again."""

    def __init__(self, error: OSError):
        self.error = error
        super().__init__(str(error))


def _in_time(wait: float, deadline: float | None) -> bool:
    """Whether another attempt after `wait` seconds would still start before `deadline` (None: no deadline)."""
    return deadline is None or time.monotonic() + wait < deadline


def _read(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, http.client.HTTPException):
        return b""


def _json(raw: bytes) -> object:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:500]


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(error, http.client.IncompleteRead):
        return "the answer was cut short"
    return one_line(str(reason) or type(reason).__name__, 300)


def _retry_after(header: str | None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), or None when absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        at = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return max(0.0, (at - datetime.now(timezone.utc)).total_seconds())


def expiry_warning(expires: str | None, token: str, *, now: datetime) -> str:
    """The warning for a token that expires at `expires` (the portal's header), or "" when that is more than
    EXPIRY_WARNING_DAYS away, absent, or not a time. Neither the token nor the answer tells a user token from a
    team token, so it says where each kind is made."""
    try:
        at = datetime.strptime(expires or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return ""
    left = (at - now).total_seconds()
    if left > EXPIRY_WARNING_DAYS * 86400:
        return ""
    days = round(left / 86400)
    when = "in less than a day" if left < 86400 else f"in {days} day{'s' if days != 1 else ''}"
    return (f"warning: token {token[:10]}... expires {at:%Y-%m-%d %H:%M} UTC ({when}); "
            "make a new one before then (a user token on your tokens page, a team token by a team lead on the team's "
            "tokens page) and set GANGWAY_TOKEN to it.")
