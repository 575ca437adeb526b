"""The one wrapper every Kubernetes call of the adapter goes through.

It decides what an answer means, so the adapter never inspects HTTP codes:
a status the caller tolerates (409 on create, 404 on delete) is success;
on one object (`one_object`), a 404 that names no object is the server not
serving the kind for a moment, never that object gone, and is retried;
429 and 5xx, and connections refused, reset or cut off, are retried with
backoff (honouring Retry-After) within a few seconds, then become
`ClusterUnavailable`, as does a read timeout at once; any other refusal
becomes a `ClusterError` naming the object's kind and name. The transport
itself never retries (`client_for`). A list of the whole cluster is read through
`list_all`, in pages that all come from one snapshot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import urllib3
from kubernetes.client import (
    ApiClient,
    ApiextensionsV1Api,
    AuthorizationV1Api,
    Configuration,
    CoreV1Api,
    CustomObjectsApi,
    SchedulingV1Api,
)
from kubernetes.client.exceptions import ApiException

from core.quantities import IN_UNITS, parse_quantity
from scheduling.cluster.base import ClusterError, ClusterUnavailable, NoAnswer

BAD_REQUEST = 400
CONFLICT = 409
NOT_FOUND = 404
GONE = 410

# Items per page of a list: what kubectl (--chunk-size) and client-go's pager ask for. It bounds what
# the API server holds in memory and serializes for one answer (a few MB of pods), while a list of
# 30,000 pods still takes 60 requests, not thousands.
PAGE_SIZE = 500
# How many times a list is read from its first page when its continue token expires under it.
LIST_ATTEMPTS = 3


class ListExpired(ClusterError):
    """The server no longer has the snapshot a list's continue token names (410 Gone, reason Expired):
    etcd compacted its history past it while the list was being read."""


def client_for(configuration: Configuration) -> ApiClient:
    """Returns a client for `configuration` whose transport never retries on its own.

    urllib3 otherwise retries a request three times, a read timeout included:
    against a server that accepts connections and never answers, one call
    would block four times its timeout, past the worker's time limit.
    `Api.call` alone retries, within its budget.
    """
    configuration.retries = urllib3.Retry(total=0, redirect=False)
    return ApiClient(configuration)


class Api:
    """The typed clients of one ApiClient, and `call`, the only way to use them."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        retry_budget: float = 3.0,
        timeout: tuple[float, float] = (5.0, 30.0),
        page_size: int = PAGE_SIZE,
    ):
        self.core = CoreV1Api(api_client)
        self.custom = CustomObjectsApi(api_client)
        self.scheduling = SchedulingV1Api(api_client)
        self.extensions = ApiextensionsV1Api(api_client)
        self.authorization = AuthorizationV1Api(api_client)
        self.retry_budget = retry_budget
        self.timeout = timeout
        self.page_size = page_size
        # (namespace, operation) where a call on one object went unanswered (a slow webhook, which answers for an
        # operation: a create, an update, a delete): the same operation on that namespace's other objects is not
        # sent for the rest of this client's life (one pass of the loop or of reconcile, which build their own),
        # as each would cost a whole read timeout, and a few would outlast the task's time limit.
        self.unanswered: set[tuple[str, str]] = set()

    def call(
        self,
        verb: str,
        kind: str,
        name: str,
        method: Callable,
        *args,
        tolerate: tuple[int, ...] = (),
        text: bool = False,
        raw: bool = False,
        stream: bool = False,
        timeout: tuple[float, float] | None = None,
        one_object: bool = False,
        **kwargs,
    ) -> dict | str | bytes | urllib3.BaseHTTPResponse | None:
        """Returns the server's answer as a dict (as text with `text`, as bytes with `raw`: a pod's log; with
        `stream`, the response itself, its body not yet read, for the caller to read and close), or None when
        its status is in `tolerate`.

        `verb kind name` ("create TFJob maps/resnet-g12") starts every error
        message. Raises ClusterError for a refusal and ClusterUnavailable when
        the server cannot be reached or stays overloaded. `timeout` (connect,
        read) replaces the client's for this call. With `one_object` (a call on
        one object: a create, a read, a resume, a suspend, a delete), a 404
        must name an object: the generic NotFound of a kind the server does
        not serve just now ("the server could not find the requested resource")
        is retried, then ClusterUnavailable, so a victim is never taken for
        stopped nor a cancel for done while its object still runs, and a create
        never counts as refused (a job failed after a few) by a moment's 404;
        and once one such call goes unanswered, the same call on the other
        objects of its namespace is not sent (`unanswered`: NoAnswer at once).
        """
        what = f"{verb} {kind} {name}"
        namespace = name.split("/", 1)[0] if one_object and "/" in name else None
        operation = (namespace, getattr(method, "__name__", verb)) if namespace is not None else None
        if operation in self.unanswered:
            raise NoAnswer(f"{what}: not sent in this pass: the same request on another object of namespace "
                           f"{namespace} was not answered in time")  # fmt: skip
        deadline = time.monotonic() + self.retry_budget
        backoff = 0.1
        while True:
            try:
                response = method(*args, _preload_content=False, _request_timeout=timeout or self.timeout, **kwargs)
                if stream:  # a whole log, read by the caller in chunks as it passes them on
                    return response
                if raw:  # the bytes as sent (a pod's log, which its reader decodes)
                    return response.data or b""
                if text:
                    return (response.data or b"").decode(errors="replace")
                return json.loads(response.data or b"null")
            except ApiException as error:
                not_served = one_object and _not_served(error)
                if error.status in tolerate and not not_served:
                    return None
                if not (not_served or _retryable(error.status)):
                    refused = ListExpired if _expired(error) else ClusterError
                    raise refused(f"{what}: {_describe(error)}") from error
                wait = _retry_after(error) or backoff
                if time.monotonic() + wait > deadline:
                    raise ClusterUnavailable(f"{what}: {_describe(error)}", error.status) from error
                time.sleep(wait)
                backoff = min(backoff * 2, 1.0)
            except urllib3.exceptions.HTTPError as error:
                # Refused, reset or cut off: tried again within the budget (a create
                # sent twice finds its object, 409, which the adapter resumes). A read
                # timeout has spent the budget already: the server is not answering.
                cause = getattr(error, "reason", None) or error
                if isinstance(cause, urllib3.exceptions.ReadTimeoutError):
                    if operation is not None:
                        self.unanswered.add(operation)
                    raise NoAnswer(f"{what}: the API server did not answer in time: {cause}") from error
                if time.monotonic() + backoff > deadline:
                    raise ClusterUnavailable(f"{what}: cannot reach the API server: {cause}") from error
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def list_all(
        self, kind: str, name: str, method: Callable, *args, tolerate: tuple[int, ...] = (), **kwargs,
    ) -> list[dict] | None:
        """Returns every item of a list (`name` "*" for the whole cluster), read in pages of `page_size`
        from one snapshot; None when a page's status is in `tolerate`.

        Each page after the first is asked by the continue token of the one before, so the server reads
        it from the snapshot of the first page. When the server has forgotten that snapshot (410 Gone,
        on a busy cluster whose history etcd compacts), the list is read again from its first page, as
        pages of two snapshots could count a pod twice or miss a job; LIST_ATTEMPTS times, then
        ClusterUnavailable. Raises what `call` raises for each page.
        """
        for _ in range(LIST_ATTEMPTS):
            try:
                return self._pages(kind, name, method, *args, tolerate=tolerate, **kwargs)
            except ListExpired as error:
                expired = error
        raise ClusterUnavailable(
            f"list {kind} {name}: the cluster changed faster than its {self.page_size}-item pages could be read "
            f"({LIST_ATTEMPTS} times the server forgot the list's snapshot: 410 Gone); read again at the next pass",
            GONE,
        ) from expired

    def _pages(self, kind: str, name: str, method: Callable, *args, tolerate: tuple[int, ...], **kwargs):
        """One reading of `list_all` from the first page to the last; None when a page's status is tolerated."""
        items, token = [], None
        while True:
            page = self.call("list", kind, name, method, *args, tolerate=tolerate, limit=self.page_size,
                             **({"_continue": token} if token else {}), **kwargs)  # fmt: skip
            if page is None:
                return None
            items.extend(page.get("items") or ())  # a page may be empty and still not the last
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items


def definition_installed(api: Api, name: str) -> bool:
    """Whether the cluster has the CustomResourceDefinition `name` ("tfjobs.kubeflow.org"): one small list by name.

    API servers now and then answer 404 for a custom resource that exists; a 404 on a list is
    "not installed" only when this says so."""
    found = api.call("list", "CustomResourceDefinition", name, api.extensions.list_custom_resource_definition,
                     field_selector=f"metadata.name={name}")  # fmt: skip
    return bool(found["items"])


def _retryable(status: int | None) -> bool:
    return status == 429 or (status or 0) >= 500


def _expired(error: ApiException) -> bool:
    """Whether the server refused a continue token it no longer has the snapshot of (410, reason Expired)."""
    if error.status != GONE:
        return False
    try:
        body = json.loads(error.body or b"{}")
    except (ValueError, TypeError):
        return False
    return isinstance(body, dict) and body.get("reason") == "Expired"


def _not_served(error: ApiException) -> bool:
    """Whether a 404 is the server's generic NotFound for a resource it does not serve, which names
    no object (`details.name`), as opposed to "tfjobs.kubeflow.org "x" not found" for one missing object."""
    if error.status != NOT_FOUND:
        return False
    try:
        body = json.loads(error.body or b"{}")
    except (ValueError, TypeError):
        return True  # not a Status: a proxy's page, not the API server's word on the object
    details = body.get("details") if isinstance(body, dict) else None
    return not (isinstance(details, dict) and details.get("name"))


def _retry_after(error: ApiException) -> float | None:
    value = (error.headers or {}).get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date; the backoff will do
        return None


def _describe(error: ApiException) -> str:
    """Returns "422 Unprocessable Entity: <the server's message>" for an error."""
    message = ""
    try:
        body = json.loads(error.body or b"{}")
        message = body.get("message", "") if isinstance(body, dict) else ""
    except (ValueError, TypeError):
        message = (error.body or b"")[:200].decode(errors="replace") if isinstance(error.body, bytes) else ""
    head = f"{error.status} {error.reason}".strip()
    return f"{head}: {message}" if message else head


def amount(resource: str, value: str | int | None) -> int:
    """Returns a Kubernetes quantity in Gangway units: cpu millicores, memory bytes, whole GPUs."""
    if value in (None, ""):
        return 0
    return int(IN_UNITS[resource](value).to_integral_value(rounding="ROUND_CEILING"))


def same_quantities(desired, actual) -> bool:
    """Returns whether two values are equal, reading strings as quantities when both parse.

    The API server rewrites quantities ("2000m" comes back as "2"), so
    comparing their text would see a change on every sync.
    """
    if isinstance(desired, dict) and isinstance(actual, dict):
        return desired.keys() == actual.keys() and all(
            same_quantities(value, actual[key]) for key, value in desired.items()
        )
    if isinstance(desired, list) and isinstance(actual, list):
        return len(desired) == len(actual) and all(map(same_quantities, desired, actual))
    if isinstance(desired, str) and isinstance(actual, str) and desired != actual:
        try:
            return parse_quantity(desired) == parse_quantity(actual)
        except ValueError:
            return False
    return type(desired) is type(actual) and desired == actual
