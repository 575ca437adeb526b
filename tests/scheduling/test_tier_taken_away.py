"""A tier taken off a team's tiers: its queued jobs at that tier wait, saying why; its running ones run on."""

from __future__ import annotations

from jobs.codes import Because
from jobs.models import Job

HALF_NODE = [{"role": "Worker", "count": 1, "gpu": 4}]
REASON = ("Its tier production is no longer allowed for team maps (it may use standard, experiment): cancel it "
          "and resubmit it at one of those tiers, or ask staff to allow production again.")


def test_a_queued_job_whose_tier_was_taken_away_waits_with_the_reason_until_it_is_allowed_again(
        submit, cycle, clock, maps, tiers):
    running = submit(name="serving", tier="production", replicas=HALF_NODE, simulate={"duration": 86400})
    cycle()
    clock.tick(5)
    cycle()
    queued = submit(name="retrain", tier="production", replicas=HALF_NODE, simulate={"duration": 86400})

    maps.tiers.remove(tiers["production"])
    for _ in range(3):
        cycle()
        clock.tick(5)

    queued.refresh_from_db()
    assert (queued.state, queued.reason_code, queued.reason) == ("queued", Because.TIER_NOT_ALLOWED, REASON)
    assert queued.position is None and queued.eta is None
    assert list(queued.events.filter(kind="waiting").values_list("message", "code")) == [
        (REASON, Because.TIER_NOT_ALLOWED)]
    assert Job.objects.get(pk=running.pk).state == "running", "admitted while allowed: it runs on"

    maps.tiers.add(tiers["production"])
    cycle()

    queued.refresh_from_db()
    assert queued.state == "admitted" and queued.tier.name == "production"
    assert queued.events.filter(kind="waiting").count() == 1


def test_a_job_held_for_its_tier_keeps_no_other_job_of_its_team_waiting(submit, cycle, clock, maps, tiers):
    held = submit(name="retrain", tier="production", replicas=HALF_NODE)
    maps.tiers.remove(tiers["production"])
    standard = submit(name="sweep", tier="standard", replicas=HALF_NODE)

    cycle()

    assert Job.objects.get(pk=held.pk).reason_code == Because.TIER_NOT_ALLOWED
    assert Job.objects.get(pk=standard.pk).state == "admitted"


def test_a_team_left_with_no_tier_is_told_to_ask_staff(submit, cycle, maps):
    held = submit(name="retrain", tier="production", replicas=HALF_NODE)
    maps.tiers.clear()

    cycle()

    held.refresh_from_db()
    assert held.state == "queued"
    assert held.reason == ("Its tier production is no longer allowed for team maps, which may use no tier now: "
                           "ask staff to allow production again, or cancel it.")
