"""Job pages: my jobs, the submit form with its live fit preview and YAML import, the job page."""

from __future__ import annotations

import re

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from jobs import kinds
from jobs.form_errors import add_fit_error, add_spec_errors, error_count, mark_invalid, unjudged
from jobs.form_initial import bound_data, initial_from_data, initial_from_job
from jobs.form_spec import preview_spec, validate
from jobs.forms import JobForm, bind, replica_formset, submission_key
from jobs.models import Job
from jobs.selectors import TIMELINE_LATEST, ending_event, get_job_for_user, jobs_for, timeline_of
from jobs.services import (
    IdempotencyConflict, KatibTrial, NeverFits, PipelinesStep, QueueFull, counted_spec, gpu_type_problem, job_cancel,
    job_check, job_submit, refuse_copy, spec_digest,
)
from jobs.spec import SpecError
from jobs.yaml_import import spec_from_yaml
from portal.live import VARY, fingerprint, live, unchanged
from scheduling.log_download import BadStart, download_start, rest_query
from scheduling.log_download import log_download as whole_log
from scheduling.logs import PAGE_TAIL, PICK, REPLICA_NAME, has_run, recent_logs
from scheduling.preview import Preview, fit_preview
from scheduling.selectors import expected_runtime_of, gpu_type_offers, manifest_of
from tenants.auth import rate_limited
from tenants.inputs import lone_surrogate_problem
from tenants.permissions import can_cancel, can_cancel_now
from tenants.selectors import teams_for, tier_for

PAGE_SIZE = 50
REPLICA = re.compile(REPLICA_NAME)
STATE_FILTERS = {
    "waiting": (Job.State.QUEUED,),
    "active": (Job.State.ADMITTED, Job.State.RUNNING, Job.State.PREEMPTING, Job.State.CANCELLING),
    "ended": Job.TERMINAL_STATES,
}


def _get_job(request, job_id: int) -> Job:
    """The job if the user may see it; 404 for anything outside their teams."""
    return get_job_for_user(request.user, job_id)


def _submit_teams(user) -> list:
    return list(teams_for(user).select_related("default_tier").prefetch_related("tiers").order_by("slug"))


@login_required
@vary_on_headers(*VARY)
def job_list(request):
    """The signed-in user's own jobs across teams, filtered by state group or a single state.

    The `rows` fragment is polled; it answers 304 while none of the rows shown has changed.
    """
    state = request.GET.get("state", "")
    jobs = jobs_for(request.user).filter(owner=request.user).order_by("-submitted_at", "-id")
    if state in STATE_FILTERS:
        jobs = jobs.filter(state__in=STATE_FILTERS[state])
    elif state in Job.State.values:
        jobs = jobs.filter(state=state)
    else:
        state = ""
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = [(job.pk, job.state, job.updated_at, job.position, job.reason, job.preemption_count) for job in page.object_list]
    etag = fingerprint(request, "my-jobs", state, page.number, page.paginator.count, shown, clock=True)
    held = unchanged(request, etag)
    if held is not None:
        return held
    context = {"page": page, "state": state, "filters": ["", *STATE_FILTERS], "states": Job.State, "etag": etag}
    if request.htmx:
        return live(render(request, "jobs/list.html#rows", context), etag)
    return render(request, "jobs/list.html", context)


def _submit_context(request, form, formset, **extra) -> dict:
    if form.is_bound:
        mark_invalid(form, formset)
    return {"form": form, "formset": formset, "error_count": error_count(form, formset) if form.is_bound else 0,
            "kinds": kinds.all_kinds(), **extra}  # fmt: skip


def _render_form(request, context: dict, status: int = 200):
    template = "jobs/submit.html#form" if request.htmx else "jobs/submit.html"
    return render(request, template, context, status=status)


@login_required
@rate_limited
@vary_on_headers("HX-Request")
def submit(request):
    """GET: the form (pre-filled from ?from=<job> to resubmit). POST: submit, or 422 with the bound form.
    One who may submit for no team gets no form, but a sentence saying whom to ask (403 to a POST)."""
    teams = _submit_teams(request.user)
    if not teams:
        return render(request, "jobs/submit.html", {"kinds": kinds.all_kinds(), "no_team": True},
                      status=403 if request.method == "POST" else 200)  # fmt: skip
    if request.method == "POST":
        form, formset = bind(request.POST, teams=teams, offers=gpu_type_offers)
        spec = validate(form, formset)
        if spec is not None:
            job, created = _submit_spec(request, form, formset, spec)
            if job is not None:
                if created:
                    messages.success(request, f"Submitted {job.name} (#{job.pk}); it waits for the next admission "
                                     "cycle.")  # fmt: skip
                else:
                    messages.info(request, f"This form was already submitted: it made {job.name} (#{job.pk}). To "
                                  "run it again, use Resubmit on its page.")  # fmt: skip
                if request.htmx:
                    return HttpResponseClientRedirect(job.get_absolute_url())
                return redirect(job)
        return _render_form(request, _submit_context(request, form, formset), status=422)
    initial, rows = {"team": request.GET.get("team", ""), "gpu_type": request.GET.getlist("gpu_type")}, None
    copied = request.GET.get("from", "")
    if copied.isascii() and copied.isdigit() and len(copied) < 19:  # "²" is a digit to isdigit(), not to int()
        source = _get_job(request, int(copied))
        try:
            refuse_copy(source)
            initial, rows = initial_from_job(source)
        except (KatibTrial, PipelinesStep) as error:  # the form opens empty, saying why
            messages.error(request, str(error))
    form = JobForm(initial=initial, teams=teams, offers=gpu_type_offers)
    formset = replica_formset(initial=rows or [{"role": "Worker", "count": 1, "gpu": 1}])
    if request.htmx and request.headers.get("HX-Target") == "tier-field":
        # Another team: its tiers, and what each GPU type offers it (swapped out of band, choices kept).
        tier = render(request, "jobs/submit.html#tier-field", {"form": form})
        types = render(request, "jobs/submit.html#gpu-type-field", {"form": form, "oob": True})
        response = HttpResponse(tier.content + types.content)
        response["HX-Trigger-After-Settle"] = "tiers-changed"  # the fit preview re-runs with the new tiers
        return response
    return render(request, "jobs/submit.html", _submit_context(request, form, formset))


def _submit_spec(request, form, formset, spec) -> tuple[Job | None, bool]:
    """(the job, whether this post made it), or (None, False) with the refusal put on the form.

    The form's submission key makes a second post of the same form return the first one's job
    (`submission_key`).
    """
    try:
        return job_submit(team=form.selected_team, spec=spec, owner=request.user, via="form",
                          idempotency_key=submission_key(form, spec_digest(spec)))  # fmt: skip
    except SpecError as error:
        add_spec_errors(form, formset, error.errors)
    except NeverFits as error:
        add_fit_error(form, formset, error.code, error.reason)
    except IdempotencyConflict as error:  # the key holds the spec's digest: only if two specs shared one
        form.add_error(None, str(error))
    except QueueFull as error:  # no field is wrong: the summary line above the form says it
        form.add_error(None, str(error))
    return None, False


@login_required
@rate_limited
@require_POST
def preview(request):
    """The live fit preview: where the job in the form would stand if submitted now (the admission policy)."""
    teams = _submit_teams(request.user)
    form, formset = bind(request.POST, teams=teams)
    spec, missing = preview_spec(form, formset)
    if spec is None:
        result = Preview("incomplete", missing)
    else:
        tier, problem = tier_for(form.selected_team, spec.tier)
        problem = problem or gpu_type_problem(spec)
        try:
            counted = counted_spec(spec, form.selected_team)
        except SpecError as error:
            problem = problem or next(iter(error.errors.values()))[0]
        result = Preview("never", problem) if problem else fit_preview(team=form.selected_team, spec=counted, tier=tier)
    return render(request, "jobs/submit.html#preview", {"preview": result, "spec": spec})


@login_required
@rate_limited
@require_POST
def import_yaml(request):
    """Fill the form from a pasted manifest of a registered kind (or a Gangway spec), listing what was not carried over.

    The filled form is checked as a submission would be (the spec, the team's
    tiers, whether it could ever run): what the API or the CLI would refuse is
    marked by its field, with the same sentence, and answers 422.
    """
    teams = _submit_teams(request.user)
    text = request.POST.get("yaml", "")
    try:
        data, unsupported = spec_from_yaml(text)
        if not isinstance(data, dict):
            raise SpecError({"yaml": [f"Expected a mapping: a {', '.join(kinds.names())} manifest or a Gangway job spec."]})
        if not data:  # nothing would be read, and the page would say every field was carried over
            raise SpecError({"yaml": [f"The mapping is empty: paste a {', '.join(kinds.names())} manifest or a "
                                      "Gangway job spec."]})
        if problem := lone_surrogate_problem(data):  # the filled form could not be written out
            raise SpecError({"yaml": [problem]})
        if not isinstance(data.get("team") or "", str):  # a Gangway spec's; a manifest's namespace is checked as read
            raise SpecError({"team": [f"Must be a string, got {type(data['team']).__name__}."]})
    except SpecError as error:
        # The form keeps what was typed in it, unjudged: only the manifest was sent to be read.
        form, formset = bind(request.POST, teams=teams, offers=gpu_type_offers)
        unjudged(form, formset)
        said = [message if where == "yaml" else f"{where}: {message}"
                for where, messages_ in error.errors.items() for message in messages_]  # fmt: skip
        context = _submit_context(request, form, formset, yaml_errors=said, yaml_text=text, import_open=True)
        context["error_count"] = 0
        return _render_form(request, context, status=422)
    initial, rows = initial_from_data(data)
    if initial["team"] not in {team.slug for team in teams}:
        if initial["team"]:
            unsupported.append(f"metadata.namespace {initial['team']!r} (not one of your teams; pick a team)")
        initial["team"] = request.POST.get("team", "")
    form, formset = bind(bound_data(initial, rows), teams=teams, offers=gpu_type_offers)
    spec = validate(form, formset)
    if spec is not None:
        try:
            job_check(team=form.selected_team, spec=spec)
        except SpecError as error:
            add_spec_errors(form, formset, error.errors)
        except NeverFits as error:
            add_fit_error(form, formset, error.code, error.reason)
    context = _submit_context(request, form, formset, imported=True, unsupported=unsupported)
    return _render_form(request, context, status=422 if context["error_count"] or form.non_field_errors() else 200)


@login_required
@vary_on_headers(*VARY)
def detail(request, job_id: int):
    """The job page; the polled `live` fragment answers 304 while the job and its events are unchanged,
    and 286 once the job has ended, which stops polling."""
    job = _get_job(request, job_id)
    whole = request.GET.get("timeline") == "all"
    cancellable = can_cancel_now(request.user, job) and not job.is_trial  # Katib stops its trials (KatibTrial)
    expected = None if job.is_terminal else expected_runtime_of(job)
    etag = fingerprint(request, "job", job.pk, job.state, job.updated_at, job.position, job.team_position, job.eta,
                       job.reason, job.reservation, job.checkpointed_at, job.preemption_count, job.placement,
                       job.events.order_by("-id").values_list("id", flat=True).first(), cancellable, expected,
                       whole, clock=True)  # fmt: skip
    held = unchanged(request, etag)
    if held is not None:
        return held
    context = {
        "job": job,
        "timeline": timeline_of(job, whole=whole),
        "timeline_whole": whole,
        "timeline_latest": TIMELINE_LATEST,
        "ending": _ending(job),
        "short": job.short_reason,
        "replicas": _replica_rows(job),
        "has_run": has_run(job),
        "can_cancel": cancellable,
        "expected": expected,
        "etag": etag,
    }
    if request.htmx:
        response = render(request, "jobs/detail.html#live", context)
        if job.is_terminal:
            return HttpResponseStopPolling(response.content)
        return live(response, etag)
    context["manifest"] = "" if job.adopted else _manifest(job)  # an adopted job's object is its owner's
    return render(request, "jobs/detail.html", context)


def _ending(job: Job) -> str:
    """Why a failed or rejected job ended: its reason, else the message of the event that ended it."""
    if job.reason or job.state not in (Job.State.FAILED, Job.State.REJECTED):
        return job.reason
    ended = ending_event(job)
    return ended.message if ended else ""


@login_required
@vary_on_headers("HX-Request")
def logs(request, job_id: int):
    """The job page's `logs` fragment: each replica's recent lines and the failing replica; 286 once the job has
    ended. Opened as a page (the job page's link without JavaScript), the same inside the portal's layout.

    The lines of one replica are read and shown, `?replica=` (worker-5) or else the failing one, else the first;
    the others are listed, each a link to its own. A 64-replica job's poll is one pod list and one log read,
    not 65 requests to the API server. The read is shared with the job's other viewers for a few seconds
    (recent_logs), after the access check."""
    job = _get_job(request, job_id)
    chosen = request.GET.get("replica", "")
    if not REPLICA.fullmatch(chosen):
        chosen = ""  # not a replica's name (a pod's name, a DNS subdomain): the page picks one
    found = recent_logs(job, tail=PAGE_TAIL, lines_of=chosen or PICK)
    context = {"job": job, "logs": found, "tail": PAGE_TAIL, "has_run": True, "chosen": chosen,
               "missing": chosen if chosen and found.replicas and found.shown is None else ""}  # fmt: skip
    if not request.htmx:
        return render(request, "jobs/logs_page.html", context)
    response = render(request, "jobs/detail.html#logs", context)
    if request.htmx and job.is_terminal:
        return HttpResponseStopPolling(response.content)
    return response


@login_required
def log_download(request, job_id: int, replica: str):
    """One replica's whole log as a text file, streamed as it is read (`log_download`: bounded in time, not
    in length), from line `?from=` on as the API's download; 404 for a replica the job does not have. A download
    the time bound cut ends with a line giving the address of the rest."""
    job = _get_job(request, job_id)
    try:
        start, last = download_start(request.GET)
    except BadStart as bad:
        return HttpResponseBadRequest(f"{bad.field}: {bad}\n", content_type="text/plain; charset=utf-8")

    def rest(name: str, lines: int, digest: str) -> str:
        return request.build_absolute_uri(f"{request.path}?{rest_query(lines, digest)}")  # the path names the replica

    found = whole_log(job, replica=replica, start=start, last=last, rest=rest)
    if found.unavailable:
        return HttpResponse(found.unavailable + "\n", status=503, content_type="text/plain; charset=utf-8")
    if found.body is None:
        raise Http404("No such replica.")
    response = StreamingHttpResponse(found.body, content_type="text/plain; charset=utf-8")
    part = f"-from-{start}" if start else ""
    response["Content-Disposition"] = f'attachment; filename="{job.name}-{job.pk}-{found.replica.replica}{part}.log"'
    return response


def _replica_rows(job: Job) -> list[dict]:
    """One row per replica: its role, index, resources and node (once placed)."""
    rows, index = [], 0
    for group in job.replicas:
        for number in range(group["count"]):
            node = job.placement[index] if index < len(job.placement) else ""
            rows.append({"role": group["role"], "number": number, "gpu": group.get("gpu", 0),
                         "cpu": group.get("cpu", 0), "memory": group.get("memory", 0), "node": node})  # fmt: skip
            index += 1
    return rows


def _manifest(job: Job) -> str:
    """The manifest of its kind Gangway creates for this job, as YAML."""
    return yaml.safe_dump(manifest_of(job), sort_keys=False, default_flow_style=False)


@login_required
@require_POST
def cancel(request, job_id: int):
    job = _get_job(request, job_id)
    if not can_cancel(request.user, job):
        raise PermissionDenied("Only the job's owner, a lead of its team or an admin may cancel it.")
    was = job.state
    try:
        job = job_cancel(job=job, actor=request.user)
    except KatibTrial as error:
        messages.error(request, str(error))
        return HttpResponseClientRedirect(job.get_absolute_url()) if request.htmx else redirect(job)
    if job.state == Job.State.CANCELLED and was == Job.State.QUEUED:
        messages.info(request, f"Cancelled {job.name} (#{job.pk}) before it was admitted; nothing ran.")
    elif job.state == Job.State.CANCELLED:
        messages.info(request, f"{job.name} (#{job.pk}) was already cancelled.")
    elif job.is_terminal:
        messages.info(request, f"{job.name} (#{job.pk}) has already ended ({job.get_state_display().lower()}).")
    elif was == Job.State.CANCELLING:
        messages.info(request, f"{job.name} (#{job.pk}) is already being cancelled.")
    else:
        messages.info(request, f"Cancel requested for {job.name} (#{job.pk}).")
    if request.htmx:
        return HttpResponseClientRedirect(job.get_absolute_url())
    return redirect(job)
