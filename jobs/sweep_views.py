"""A Katib sweep's page: its trials, and why the waiting ones wait."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.vary import vary_on_headers

from jobs.selectors import best_trial_of, get_sweep_for_user, trials_of, with_waits
from portal.live import VARY, fingerprint, live, unchanged

TRIALS_PAGE = 50  # a sweep of 40 trials on one page


@login_required
@vary_on_headers(*VARY)
def sweep_detail(request, sweep_id: int):
    """The sweep's page: its figures (trials running, waiting and done, GPUs held against its team's cap,
    the best objective), once its experiment has ended how and when with its best trial, its waiting trials
    grouped by why they wait, and its trials a page at a time. Another team's sweep answers 404.

    The `live` fragment is polled; it answers 304 while nothing it shows has changed. It keeps
    polling once every trial has ended: Katib may start more of its trials.
    """
    sweep = with_waits([get_sweep_for_user(request.user, sweep_id)])[0]
    page = Paginator(trials_of(request.user, sweep), TRIALS_PAGE).get_page(request.GET.get("page"))
    shown = [(job.pk, job.state, job.updated_at, job.position, job.reason, job.preemption_count)
             for job in page.object_list]  # fmt: skip
    figures = (sweep.running, sweep.waiting, sweep.done, sweep.gpus, sweep.gpu_cap, sweep.best_objective,
               sweep.objective, getattr(sweep.tier, "pk", None), sweep.waits, sweep.ended, sweep.ended_at,
               sweep.best_trial, sweep.best_metrics)  # fmt: skip
    etag = fingerprint(request, "sweep", sweep.pk, figures, page.number, page.paginator.count, shown, clock=True)
    held = unchanged(request, etag)
    if held is not None:
        return held
    ended = bool(sweep.ended) and not sweep.running and not sweep.waiting  # Katib may resume an ended experiment
    context = {"sweep": sweep, "page": page, "etag": etag, "ended": ended,
               "best": best_trial_of(request.user, sweep) if ended else None}  # fmt: skip
    if request.htmx:
        return live(render(request, "jobs/sweep.html#live", context), etag)
    return render(request, "jobs/sweep.html", context)
