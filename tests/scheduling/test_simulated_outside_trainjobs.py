"""An outside TrainJob on the simulated cluster: adopted, admitted in place by the same patch, never deleted."""

from __future__ import annotations

from jobs.models import Job
from scheduling.cluster import simulated_outside
from scheduling.models import SimOutsideJob
from tests.cluster.test_outside_trainjobs import outside_trainjob


def test_an_adopted_trainjob_is_admitted_by_patching_it_in_place(maps, clock, cycle):
    simulated_outside.add(outside_trainjob(gpu=2), now=clock())

    cycle()

    job = Job.objects.get()
    assert (job.kind, job.state, job.gpu_total) == ("TrainJob", Job.State.ADMITTED, 4)
    spec = SimOutsideJob.objects.get().manifest["spec"]
    assert spec["suspend"] is False
    assert [patch["manager"] for patch in spec["runtimePatches"]] == ["example.com/notebook", "gangway.io/scheduler"]
    assert spec["trainer"] == outside_trainjob(gpu=2)["spec"]["trainer"]
