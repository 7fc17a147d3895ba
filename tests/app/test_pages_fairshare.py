"""The fair-share editor: live validation by governance rules, diff and preview, audited save, revert."""

from decimal import Decimal
from html import unescape

import pytest
from django.urls import reverse

from scheduling.models import Queue

from .test_pages_support import build_site

pytestmark = pytest.mark.django_db


@pytest.fixture
def editor(client, orchestrator, fleet, teams, queues, cast):
    build_site(orchestrator, fleet, teams)
    client.force_login(cast["admin"])
    return client


def _rows(**edits) -> dict:
    """The editor's POST data with the current values, then ``edits`` as {slug: (weight, guaranteed, burst)}."""
    queues = sorted(Queue.objects.select_related("team"), key=lambda q: q.pk)
    data = {"q-TOTAL_FORMS": len(queues), "q-INITIAL_FORMS": len(queues), "q-MIN_NUM_FORMS": 0, "q-MAX_NUM_FORMS": 1000}
    for i, queue in enumerate(queues):
        weight, guaranteed, burst = edits.get(queue.team.slug, (queue.weight, queue.guaranteed, queue.burst_limit))
        data.update(
            {
                f"q-{i}-queue": queue.pk,
                f"q-{i}-weight": weight,
                f"q-{i}-guaranteed": guaranteed,
                f"q-{i}-burst_limit": burst,
            }
        )
    return data


def test_the_editor_lists_every_queue_in_tree_order(editor):
    body = editor.get(reverse("fairshare")).content.decode()
    assert body.index("production/any") < body.index("research/any") < body.index("nlp/any")


def test_live_validation_rejects_a_split_over_100_percent(editor):
    response = editor.post(reverse("fairshare-check"), _rows(research=(50, 16, 48)))
    body = unescape(response.content.decode())
    assert 'data-valid="false"' in body
    assert "weights of one parent's children sum to 110.00%" in body and "research 50" in body
    assert Queue.objects.get(team__slug="research").weight == Decimal(40)


def test_live_validation_rejects_guarantees_beyond_capacity(editor):
    body = unescape(editor.post(reverse("fairshare-check"), _rows(production=(60, 60, 64))).content.decode())
    assert "(and sub-teams' no parent queue holds) plus live grants cannot all be served: from " in body
    assert "all promises (any-model and per-model) would be 76 on the fleet's 64 GPUs (64 H100), 12 short." in body


def test_a_guarantee_above_the_burst_limit_is_a_field_error(editor):
    body = unescape(editor.post(reverse("fairshare"), _rows(nlp=(100, 40, 32))).content.decode())
    assert "nlp Guaranteed GPUs: Guaranteed (40) must not exceed the burst limit (32)." in body


def test_a_valid_edit_shows_the_diff_and_the_entitlements_before_and_after(editor):
    response = editor.post(reverse("fairshare-check"), _rows(research=(30, 16, 48), production=(70, 24, 64)))
    body = unescape(response.content.decode())
    assert 'data-valid="true"' in body
    assert 'id="diff"' in body and "40 → <strong>30</strong>" in body
    assert 'id="preview"' in body and "Entitled before" in body


def test_saving_needs_a_reason(editor):
    body = unescape(
        editor.post(reverse("fairshare"), {**_rows(research=(30, 16, 48)), "action": "save"}).content.decode()
    )
    assert "Reason: A reason is required" in body
    assert Queue.objects.get(team__slug="research").weight == Decimal(40)


def test_saving_applies_all_edits_with_author_and_reason_and_revert_undoes_them_together(editor, cast):
    data = {**_rows(research=(30, 16, 48), production=(70, 24, 64)), "action": "save", "reason": "Q3 plan"}
    response = editor.post(reverse("fairshare"), data)
    assert response.status_code == 302 and response["Location"] == reverse("fairshare-history")
    research = Queue.objects.get(team__slug="research")
    assert research.weight == Decimal(30)
    latest = research.history.first()
    assert latest.history_user == cast["admin"] and latest.history_change_reason == "Q3 plan"
    history = unescape(editor.get(reverse("fairshare-history")).content.decode())
    assert "Q3 plan" in history and "weight 40→30 %" in history

    editor.post(reverse("fairshare-revert", args=[latest.history_id]))
    research.refresh_from_db()
    assert research.weight == Decimal(40)  # and production back to 60 with it, or the split would be 110 %
    assert Queue.objects.get(team__slug="production").weight == Decimal(60)
    assert research.history.first().history_change_reason.startswith(f"revert change #{latest.history_id} (Q3 plan)")


def test_a_revert_that_would_break_the_rules_is_refused(editor):
    editor.post(reverse("fairshare"), {**_rows(research=(30, 16, 48)), "action": "save", "reason": "shrink research"})
    change = Queue.objects.get(team__slug="research").history.first()
    editor.post(reverse("fairshare"), {**_rows(production=(70, 24, 64)), "action": "save", "reason": "grow prod"})
    response = editor.post(reverse("fairshare-revert", args=[change.history_id]), follow=True)
    assert "Revert refused" in unescape(response.content.decode())
    assert Queue.objects.get(team__slug="research").weight == Decimal(30)


def test_non_admins_cannot_post_to_the_editor(client, orchestrator, fleet, teams, queues, cast):
    client.force_login(cast["lead"])
    assert client.post(reverse("fairshare-check"), _rows()).status_code == 403
    assert client.post(reverse("fairshare"), {**_rows(), "action": "save", "reason": "x"}).status_code == 403


@pytest.mark.parametrize("edited, other", [("research", "production"), ("production", "research")])
def test_a_split_over_100_percent_is_pinned_on_the_row_that_was_edited(editor, edited, other):
    weights = {"research": (70, 16, 48), "production": (80, 24, 64)}
    body = unescape(editor.post(reverse("fairshare"), _rows(**{edited: weights[edited]})).content.decode())

    def row_tag(slug: str) -> str:  # the <tr ...> that opens a team's row
        return body.split(f'data-team="{slug}"', 1)[0].rsplit("<tr", 1)[1]

    assert "weights of one parent's children sum to" in body
    assert "invalid" in row_tag(edited) and "invalid" not in row_tag(other)


@pytest.mark.parametrize(
    "typed, said",
    [
        ("6e", "'6e' is not a percentage (a number such as 40 or 12.5)."),
        ("abc", "'abc' is not a percentage (a number such as 40 or 12.5)."),
        ("", "This field is required."),
    ],
)
def test_what_was_typed_in_a_weight_is_named_when_it_is_not_a_number(editor, typed, said):
    body = unescape(editor.post(reverse("fairshare-check"), _rows(nlp=(typed, 8, 32))).content.decode())
    assert 'data-valid="false"' in body and f"nlp Weight %</strong>: {said}" in body


def test_the_preview_shows_fair_share_before_and_after_and_why_an_entitlement_stays(editor):
    body = unescape(
        editor.post(reverse("fairshare-check"), _rows(research=(30, 16, 48), production=(70, 24, 64))).content.decode()
    )
    assert "Fair share before" in body and "Fair share after" in body and "Entitled before" in body
    assert "(+" in body or "(-" in body  # a signed change where the fair share moved
