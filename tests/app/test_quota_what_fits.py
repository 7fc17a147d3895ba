"""After a refused feasibility check the quota form says what would fit (issue #33 item 16): the most GPUs over
the period asked, and the earliest period as long for the GPUs asked, both from the promise engine; taking one
re-checks it like typed values."""

from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse

from scheduling.services import feasibility, quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_start(cast, teams, queues, period):
    """The fleet's 64 GPUs: 40 guaranteed, and a 20-GPU grant to production over the first three days, so only 4
    are unpromised until it ends."""
    start, _end = period
    granted = quota.create_request(
        requester=cast["outsider"], team=teams["production"], gpus=20, starts_at=start,
        ends_at=start + timedelta(days=3), justification="launch week",
    )
    quota.approve_request(granted.pk, by=cast["admin"], comment="fits")
    return start, start + timedelta(days=3)


def _form(teams, start, end, gpus, **extra):
    return {
        "team": teams["nlp"].pk, "gpus": gpus, "gpu_model": "", "orchestrator": "",
        "starts_at": f"{start:%Y-%m-%dT%H:%M}", "ends_at": f"{end:%Y-%m-%dT%H:%M}",
        "justification": "ablations", "action": "check", **extra,
    }


def test_a_refused_check_offers_the_largest_amount_and_the_earliest_period(teams, busy_start):
    start, grant_end = busy_start
    check = feasibility.check_request(teams["nlp"], 10, "", start, start + timedelta(days=2))
    assert not check.fits
    fit = check.what_fits
    assert fit.largest == 4
    earliest_start, earliest_end = fit.earliest
    assert grant_end <= earliest_start < grant_end + timedelta(minutes=1) and earliest_start.second == 0
    assert earliest_end - earliest_start == timedelta(days=2)
    assert feasibility.check_request(teams["nlp"], 10, "", earliest_start, earliest_end).fits
    assert feasibility.check_request(teams["nlp"], 4, "", start, start + timedelta(days=2)).fits


def test_a_feasible_check_offers_nothing_and_an_impossible_amount_no_period(teams, busy_start):
    start, _ = busy_start
    assert feasibility.check_request(teams["nlp"], 4, "", start, start + timedelta(days=1)).what_fits is None
    fit = feasibility.check_request(teams["nlp"], 65, "", start, start + timedelta(days=1)).what_fits
    assert (fit.largest, fit.earliest) == (4, None)


def test_the_form_shows_the_suggestions_and_taking_one_checks_it_again(client, cast, teams, busy_start):
    start, grant_end = busy_start
    client.force_login(cast["researcher"])
    asked = _form(teams, start, start + timedelta(days=2), 10)
    body = unescape(client.post(reverse("quota-new"), asked).content.decode())
    assert "What would fit" in body and "At most <strong>4 GPUs</strong> over the same period" in body
    assert 'value="gpus:4"' in body and "the earliest period as long" in body
    taken = unescape(client.post(reverse("quota-new"), {**asked, "fit": "gpus:4"}).content.decode())
    assert "Not feasible as asked" not in taken and 'name="gpus" value="4"' in taken
    later = grant_end.replace(second=0, microsecond=0) + timedelta(minutes=1)
    period = f"period:{later:%Y-%m-%dT%H:%M}/{later + timedelta(days=2):%Y-%m-%dT%H:%M}"
    assert period in body
    moved = unescape(client.post(reverse("quota-new"), {**asked, "fit": period}).content.decode())
    assert "Not feasible as asked" not in moved and f'value="{later:%Y-%m-%dT%H:%M}"' in moved


def test_a_bad_suggestion_is_refused_by_the_forms_rules(client, cast, teams, busy_start):
    start, _ = busy_start
    client.force_login(cast["researcher"])
    body = unescape(client.post(reverse("quota-new"), {
        **_form(teams, start, start + timedelta(days=2), 10), "fit": "period:yesterday/"}).content.decode())
    assert "Start (UTC):" in body and "Not feasible" not in body
