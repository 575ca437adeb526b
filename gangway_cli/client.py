"""A small HTTP client for Gangway's REST API on urllib: JSON in and out, retries where they are safe."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

USER_AGENT = "gangway-cli/1"
RETRY_STATUSES = {429, 502, 503, 504}


class ApiError(Exception):
    """The server answered with an error, or could not be reached (status 0)."""

    def __init__(self, status: int, body: object, message: str):
        self.status, self.body = status, body
        super().__init__(message)


@dataclass
class Response:
    status: int
    body: object
    headers: dict = field(default_factory=dict)


def describe(body: object) -> str:
    """A DRF error body as lines a person can read: the detail, or one line per field."""
    if isinstance(body, dict):
        if "detail" in body and len(body) <= 3:
            return str(body["detail"])
        lines = []
        for key, value in body.items():
            messages = value if isinstance(value, list) else [value]
            lines.extend(f"{key}: {message}" for message in messages)
        return "\n".join(lines)
    return str(body)


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30, retries: int = 4, sleep=time.sleep):
        self.base = url.rstrip("/") + "/"
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.sleep = sleep

    def url(self, path: str, query: dict | None = None) -> str:
        url = urllib.parse.urljoin(self.base, path.lstrip("/"))
        return f"{url}?{urllib.parse.urlencode(query)}" if query else url

    def request(self, method: str, path: str, *, data: bytes | None = None, content_type: str = "application/json",
                query: dict | None = None, headers: dict | None = None, retry: bool | None = None) -> Response:  # fmt: skip
        """The server's answer; raises ApiError for 4xx/5xx and for a server out of reach.

        GETs, and writes the caller marks safe to repeat (an idempotency key),
        are retried on connection errors, 429 (after Retry-After) and 502-504.
        """
        retry = method == "GET" if retry is None else retry
        all_headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "User-Agent": USER_AGENT}
        if data is not None:
            all_headers["Content-Type"] = content_type
        all_headers.update(headers or {})
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            request = urllib.request.Request(self.url(path, query), data=data, method=method, headers=all_headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    return Response(answer.status, _json(answer.read()), dict(answer.headers))
            except urllib.error.HTTPError as error:
                body = _json(error.read())
                if error.code in RETRY_STATUSES and attempt + 1 < attempts:
                    self.sleep(_retry_after(error.headers.get("Retry-After"), attempt))
                    continue
                raise ApiError(error.code, body, describe(body) or f"HTTP {error.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if attempt + 1 < attempts:
                    self.sleep(_retry_after(None, attempt))
                    continue
                reason = getattr(error, "reason", error)
                raise ApiError(0, None, f"Cannot reach {self.base}: {reason}") from None
        raise AssertionError("unreachable")

    def get(self, path: str, **query) -> object:
        return self.request("GET", path, query={k: v for k, v in query.items() if v is not None}).body


def _json(raw: bytes) -> object:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:500]


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return max(0.0, float(header)) if header else min(30.0, 2.0**attempt)
    except ValueError:
        return min(30.0, 2.0**attempt)
