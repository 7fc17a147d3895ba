"""Issue 16: quota requests: a bounded justification, and a double submission files one request."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from scheduling.limits import JUSTIFICATION_MAX_CHARS
from scheduling.models import QuotaRequest
from scheduling.services import quota

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db


def _body(teams, **overrides) -> dict:
    start = timezone.now() + timedelta(days=1)
    return {
        "team": teams["nlp"].slug,
        "gpus": 4,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=7)).isoformat(),
        "justification": "ablation study",
        **overrides,
    }


def test_an_api_justification_of_two_megabytes_is_a_400_naming_the_field_and_the_limit(cast, teams, queues):
    response = api_as(cast["researcher"]).post(
        "/api/v1/quota-requests/", _body(teams, justification="x" * 2_000_000), format="json"
    )
    assert response.status_code == 400
    assert str(JUSTIFICATION_MAX_CHARS) in response.json()["justification"][0]
    assert not QuotaRequest.objects.exists()


def test_a_justification_at_the_limit_is_accepted(cast, teams, queues):
    response = api_as(cast["researcher"]).post(
        "/api/v1/quota-requests/", _body(teams, justification="x" * JUSTIFICATION_MAX_CHARS), format="json"
    )
    assert response.status_code == 201, response.content[:300]


def test_the_service_refuses_a_justification_over_the_limit_whoever_calls_it(cast, teams, queues):
    start = timezone.now() + timedelta(days=1)
    with pytest.raises(ValidationError) as refused:
        quota.create_request(
            requester=cast["researcher"],
            team=teams["nlp"],
            gpus=1,
            starts_at=start,
            ends_at=start + timedelta(days=1),
            justification="x" * (JUSTIFICATION_MAX_CHARS + 1),
        )
    assert str(JUSTIFICATION_MAX_CHARS) in refused.value.message_dict["justification"][0]


def test_the_form_and_the_api_share_the_justification_limit(client, cast, teams, queues):
    client.force_login(cast["researcher"])
    body = _body(teams, team=teams["nlp"].pk, justification="x" * (JUSTIFICATION_MAX_CHARS + 1), action="submit")
    response = client.post(reverse("quota-new"), body)
    assert response.status_code == 200
    assert f"at most {JUSTIFICATION_MAX_CHARS} characters" in response.content.decode()
    assert not QuotaRequest.objects.exists()


# --- double submissions: idempotency keys -------------------------------------------------------------------


def _post(client, body: dict, key: str | None = "key-1"):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post("/api/v1/quota-requests/", body, format="json", **headers)


def test_the_same_key_and_body_sent_twice_files_one_request_and_answers_the_first_body(cast, teams, queues):
    client, body = api_as(cast["researcher"]), _body(teams)
    first, second = _post(client, body), _post(client, body)
    assert first.status_code == 201 and second.status_code == 200
    assert second.json() == first.json() and second["Idempotent-Replayed"] == "true"
    assert QuotaRequest.objects.count() == 1


def test_the_same_key_with_another_body_is_a_422_naming_the_header(cast, teams, queues):
    client = api_as(cast["researcher"])
    assert _post(client, _body(teams)).status_code == 201
    response = _post(client, _body(teams, gpus=8))
    assert response.status_code == 422 and "Idempotency-Key" in response.json()
    assert QuotaRequest.objects.count() == 1


def test_keys_belong_to_one_user(cast, teams, queues):
    assert _post(api_as(cast["researcher"]), _body(teams)).status_code == 201
    assert _post(api_as(cast["nlp_lead"]), _body(teams)).status_code == 201
    assert QuotaRequest.objects.count() == 2


def test_without_a_key_each_post_files_a_request(cast, teams, queues):
    client = api_as(cast["researcher"])
    assert [_post(client, _body(teams), key=None).status_code for _ in range(2)] == [201, 201]
    assert QuotaRequest.objects.count() == 2


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "naïve"])
def test_a_malformed_key_is_a_400_naming_the_header(cast, teams, queues, key):
    response = _post(api_as(cast["researcher"]), _body(teams), key=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()
    assert not QuotaRequest.objects.exists()


def test_a_refused_request_leaves_its_key_free_for_the_corrected_retry(cast, teams, queues):
    client = api_as(cast["researcher"])
    assert _post(client, _body(teams, gpus=0)).status_code == 400
    assert _post(client, _body(teams)).status_code == 201


def test_a_key_older_than_a_day_is_free_again_and_purged(cast, teams, queues):
    from scheduling.models import IdempotencyKey
    from scheduling.services import idempotency

    client = api_as(cast["researcher"])
    assert _post(client, _body(teams)).status_code == 201
    IdempotencyKey.objects.update(created_at=timezone.now() - idempotency.KEEP - timedelta(minutes=1))
    assert _post(client, _body(teams)).status_code == 201
    assert QuotaRequest.objects.count() == 2 and IdempotencyKey.objects.count() == 1
    IdempotencyKey.objects.update(created_at=timezone.now() - idempotency.KEEP - timedelta(minutes=1))
    assert idempotency.purge_expired() == 1 and not IdempotencyKey.objects.exists()


def _form(teams, key: str) -> dict:
    return _body(teams, team=teams["nlp"].pk, action="submit", idempotency_key=key)


def test_the_request_form_carries_a_fresh_key_each_time_it_is_shown(client, cast, teams, queues):
    client.force_login(cast["researcher"])
    keys = [client.get(reverse("quota-new")).context["form"].initial["idempotency_key"] for _ in range(2)]
    assert all(keys) and keys[0] != keys[1]
    assert 'name="idempotency_key"' in client.get(reverse("quota-new")).content.decode()


def test_a_double_submitted_form_files_one_request_and_redirects_to_it(client, cast, teams, queues):
    client.force_login(cast["researcher"])
    first = client.post(reverse("quota-new"), _form(teams, "form-key"))
    second = client.post(reverse("quota-new"), _form(teams, "form-key"))
    created = QuotaRequest.objects.get()
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"] == reverse("quota-detail", args=[created.pk])
    assert "already sent" in client.get(second["Location"]).content.decode()


def test_checking_feasibility_keeps_the_forms_key(client, cast, teams, queues):
    client.force_login(cast["researcher"])
    response = client.post(reverse("quota-new"), {**_form(teams, "kept-key"), "action": "check"})
    assert 'value="kept-key"' in response.content.decode() and not QuotaRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_posts_with_one_key_at_the_same_moment_file_one_request(cast, teams, queues):
    """The second waits on the key's unique index until the first commits, then replays it (PostgreSQL)."""
    import threading

    from django.db import connections

    from tests.support import require_postgres

    require_postgres()
    body, barrier, statuses = _body(teams), threading.Barrier(2), []

    def send() -> None:
        client = api_as(cast["researcher"])
        barrier.wait()
        statuses.append(_post(client, body, key="same-moment").status_code)
        connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 201] and QuotaRequest.objects.count() == 1
