"""The role matrix, every endpoint × role × read/write, against tests/access_matrix.py."""

import pytest

from tests.access_matrix import READS, ROLES, WRITES

pytestmark = pytest.mark.django_db


def _path(template, nlp_request, queues, orchestrator, report=None):
    return template.format(
        request=nlp_request.pk,
        queue=queues["research"].pk,
        orchestrator=orchestrator.pk,
        report=getattr(report, "pk", 0),
    )


def _write_body(path, iso_period, teams):
    start, end, _ = iso_period
    if path.endswith("/quota-requests/"):
        return {"team": "nlp", "gpus": 2, "starts_at": start, "ends_at": end, "justification": "matrix"}
    if path.endswith("/queues/"):
        return {"team": "nlp", "gpu_model": "H100", "weight": "10", "guaranteed": 0, "burst_limit": 8, "reason": "m"}
    if "/queues/" in path:
        return {"weight": "35", "reason": "matrix"}
    if path.endswith("/reports/subscription/"):
        return {"format": "pdf"}
    if path.endswith("/orchestrators/"):
        return {"name": "ray-m", "kind": "ray", "endpoint": "http://127.0.0.1:8265"}
    if path.endswith("/whatif/"):
        return {"name": "matrix", "team": "research", "inputs": {"weeks": 1, "weights": {"nlp": "90"}}}
    if "/orchestrators/" in path:
        return {"enabled": False}
    if path.endswith("/group-mappings/"):
        return {"pattern": "gpu-*", "team": "nlp", "role": "lead", "reason": "matrix"}
    if path.endswith("/ledger/hosts/"):
        return {"name": "dgx-m", "gpu_total": 8, "reason": "matrix"}
    if path.endswith("/ledger/aliases/"):
        from scheduling.models import FleetHost

        FleetHost.objects.get_or_create(name="dgx-a", defaults={"gpu_total": 8})
        return {"orchestrator": "slurm-a", "name": "10.0.0.9", "host": "dgx-a", "reason": "matrix"}
    return {"comment": "matrix decision"}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("template", sorted(READS))
def test_reads_follow_the_matrix(api, role, template, nlp_request, queues, orchestrator, stored_report):
    response = api(role).get(_path(template, nlp_request, queues, orchestrator, stored_report))
    if role in READS[template]:
        assert response.status_code == 200, response.content
    else:
        assert response.status_code in (401, 403, 404), response.content


def _refused_as_missing(response) -> bool:
    """A write naming a team the user may not see is refused as one naming a team that does not exist."""
    if response.status_code != 400:
        return False
    errors = response.json().get("team") or [""]
    return len(errors) == 1 and errors[0].startswith("Object with slug=") and errors[0].endswith(" does not exist.")


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("method", "template"), sorted(WRITES))
def test_writes_follow_the_matrix(api, role, method, template, nlp_request, queues, orchestrator, iso_period, teams):
    path = _path(template, nlp_request, queues, orchestrator)
    response = getattr(api(role), method)(path, _write_body(path, iso_period, teams), format="json")
    if role in WRITES[(method, template)]:
        assert 200 <= response.status_code < 300, response.content
    else:
        assert response.status_code in (401, 403, 404) or _refused_as_missing(response), response.content


def test_an_outsider_cannot_find_another_teams_request_by_guessing_its_id(api, nlp_request):
    response = api("outsider").get(f"/api/v1/quota-requests/{nlp_request.pk}/")
    assert response.status_code == 404
    listed = api("outsider").get("/api/v1/quota-requests/").json()
    assert listed["count"] == 0


def test_workloads_of_other_teams_are_not_listed(api, orchestrator, teams):
    from django.utils import timezone

    from scheduling.models import Workload

    Workload.objects.create(
        orchestrator=orchestrator, external_id="1", team=teams["production"], submitted_at=timezone.now()
    )
    Workload.objects.create(orchestrator=orchestrator, external_id="2", team=teams["nlp"], submitted_at=timezone.now())
    ids = [w["external_id"] for w in api("researcher").get("/api/v1/workloads/").json()["results"]]
    assert ids == ["2"]
