"""Issue 16, secrets: a credential never reaches a stored, shown or logged error; a credentials reference
names only a GPUPORTAL_SECRET_* variable or a file inside the credentials directory; endpoints are http(s)."""

import base64
import io
import json
import logging
from urllib.parse import quote

import pytest
from django.core.management import CommandError, call_command
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.collectors import SourceUnavailable
from scheduling.models import CollectorRun, Orchestrator, RebalancePlan
from scheduling.redact import MASK, RedactingFilter, redact
from scheduling.services import collection, rebalance
from scheduling.services.orchestrators import resolve_secret
from tests.rebalance.conftest import MONDAY_9

pytestmark = pytest.mark.django_db

SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.sig-Zq81"
SECRET_ENV = "GPUPORTAL_SECRET_SLURM_JWT"


@pytest.fixture
def slurm(echo_server, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    url, _received = echo_server
    return Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=url, credentials_ref=f"env:{SECRET_ENV}")


def _stored(orchestrator: Orchestrator) -> str:
    """Every error text the portal kept about the orchestrator."""
    orchestrator.refresh_from_db()
    runs = list(CollectorRun.objects.filter(orchestrator=orchestrator).values_list("error", flat=True))
    return json.dumps([orchestrator.last_error, orchestrator.breaker_state, runs])


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user)[1]}")
    return client


# ------------------------------------------------------------------------------------ masking errors


def test_a_token_the_orchestrator_echoes_is_masked_in_last_error_runs_and_the_breaker(slurm, echo_server):
    for _ in range(4):  # the third failure opens the breaker; the fourth repeats the error it remembered
        collection.scrape(slurm.pk)
    stored = _stored(slurm)
    assert SECRET in echo_server[1][0], "the token was sent and echoed back"
    assert "circuit open" in stored and MASK in stored
    assert SECRET not in stored


def test_every_spelling_of_a_secret_is_masked_even_line_by_line():
    secret = "user-name-1:first-line-pw\nsecond-line-pw"
    texts = [
        f"Illegal header value {('Bearer ' + secret).encode()!r}",
        json.dumps({"detail": f"bad token {secret}"}),
        f"GET /api?token={quote(secret, safe='')} -> 401",
        "Authorization: Basic " + base64.b64encode(secret.encode()).decode(),
        "the server quoted only: second-line-pw",
    ]
    for text in texts:
        masked = redact(text, [secret])
        assert MASK in masked, text
        assert "first-line-pw" not in masked and "second-line-pw" not in masked, masked
        assert base64.b64encode(secret.encode()).decode() not in masked


def test_a_secret_a_header_cannot_carry_is_refused_by_name_without_being_sent(
    credentials_dir, echo_server, monkeypatch
):
    (credentials_dir / "slurm.jwt").write_text("first-half-of-it\nsecond-half-of-it\n")
    url, received = echo_server
    orchestrator = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint=url, credentials_ref=f"file:{credentials_dir / 'slurm.jwt'}"
    )
    collection.scrape(orchestrator.pk)
    stored = _stored(orchestrator)
    assert "cannot carry at offset 16" in orchestrator.last_error
    assert "first-half" not in stored and "second-half" not in stored
    assert received == []


def test_a_logged_traceback_masks_the_secrets_this_process_resolved(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    resolve_secret(f"env:{SECRET_ENV}")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.security.secrets")
    logger.addHandler(handler)
    try:
        raise SourceUnavailable(f"hpc: slurmrestd rejected {SECRET}")
    except SourceUnavailable:
        logger.exception("scrape of %s failed with %s", "hpc", SECRET)
    finally:
        logger.removeHandler(handler)
    logged = stream.getvalue()
    assert "Traceback" in logged and "scrape of hpc failed" in logged
    assert SECRET not in logged


def test_the_portal_and_celery_log_handlers_carry_the_secrets_filter(settings):
    from celery.signals import after_setup_logger

    assert settings.LOGGING["handlers"]["console"]["filters"] == ["secrets"]
    logger = logging.Logger("celery-root-stand-in")
    logger.addHandler(logging.StreamHandler(io.StringIO()))
    after_setup_logger.send(sender=None, logger=logger, loglevel=logging.INFO, logfile=None, format="", colorize=False)
    assert any(isinstance(f, RedactingFilter) for f in logger.handlers[0].filters)


class LeakyVerbs(rebalance.DemoVerbs):
    def take(self, node: str) -> str:
        raise OSError(f"apiserver refused the bearer token {SECRET}")


def test_a_failed_rebalance_masks_the_credentials_an_actuator_quoted(
    federation,
    inference_floor,
    cast,
    monkeypatch,
    caplog,
):
    monkeypatch.setenv("GPUPORTAL_SECRET_K8S_TOKEN", SECRET)
    Orchestrator.objects.filter(name="k8s-serving").update(credentials_ref="env:GPUPORTAL_SECRET_K8S_TOKEN")
    plan = rebalance.approve_plan(rebalance.propose_plan(MONDAY_9).plan, by=cast["admin"], reason="floor")
    verbs = lambda orch, dry: (LeakyVerbs if orch.kind == "kubernetes" else rebalance.DemoVerbs)(orch, dry)  # noqa: E731
    with caplog.at_level(logging.WARNING):
        rebalance.apply_step(plan.pk, MONDAY_9, verbs=verbs)
        outcome = rebalance.apply_step(plan.pk, MONDAY_9, verbs=verbs)
    plan.refresh_from_db()
    reasons = " ".join(plan.history.values_list("history_change_reason", flat=True))
    assert plan.state == RebalancePlan.State.FAILED and "apiserver refused" in plan.error
    assert SECRET not in plan.error + outcome.message + reasons + caplog.text


# --------------------------------------------------------------------------- who sees error details


def test_anonymous_health_shows_one_word_per_component_and_no_error_text(client, orchestrator):
    Orchestrator.objects.filter(pk=orchestrator.pk).update(last_error="slurmrestd at 10.0.0.7 said: go away")
    body = client.get("/health").json()
    assert set(body["checks"]) == {"database", "broker", "cache", "orchestrators", "worker", "collector", "rounds"}
    assert body["checks"]["database"] == "ok" and body["checks"]["orchestrators"] == "degraded"
    assert body["checks"]["broker"] in ("ok", "degraded") and body["checks"]["cache"] in ("ok", "degraded")
    assert "10.0.0.7" not in json.dumps(body)


def test_health_details_go_to_admins_and_to_the_metrics_token(client, cast, orchestrator, settings):
    Orchestrator.objects.filter(pk=orchestrator.pk).update(last_error="slurmrestd at 10.0.0.7 said: go away")
    settings.METRICS_TOKEN = "probe-token"
    by_token = client.get("/health", HTTP_AUTHORIZATION="Bearer probe-token").json()
    assert by_token["checks"]["orchestrators"]["slurm-a"]["last_error"].startswith("slurmrestd at 10.0.0.7")
    assert client.get("/health", HTTP_AUTHORIZATION="Bearer wrong-tökén").json()["checks"]["orchestrators"] == (
        "degraded"
    )
    client.force_login(cast["researcher"])
    assert "10.0.0.7" not in client.get("/health").content.decode()
    client.force_login(cast["admin"])
    assert "10.0.0.7" in client.get("/health").content.decode()


def test_orchestrator_and_collector_run_errors_in_the_api_are_for_admins_only(cast, orchestrator):
    Orchestrator.objects.filter(pk=orchestrator.pk).update(last_error="detail for admins")
    CollectorRun.objects.create(orchestrator=orchestrator, started_at=MONDAY_9, ok=False, error="detail for admins")
    researcher, admin = _api(cast["researcher"]), _api(cast["admin"])
    for path, field in (("/api/v1/orchestrators/", "last_error"), ("/api/v1/collector-runs/", "error")):
        seen = researcher.get(path).json()["results"][0]
        assert field not in seen and "detail for admins" not in json.dumps(seen), path
        assert admin.get(path).json()["results"][0][field] == "detail for admins", path


# --------------------------------------------------------------------- where a reference may point


@pytest.fixture
def outside(tmp_path):
    """A file outside the credentials directory, and a symlink to it from inside."""
    target = tmp_path / "not-a-credential"
    target.write_text("root:x:0:0")
    return target


def _refused_references(credentials_dir, outside) -> list[str]:
    (credentials_dir / "link").symlink_to(outside)
    return [
        "env:SECRET_KEY",
        "env:GPUPORTAL_SECRET_",
        "env:DATABASE_URL",
        "file:/etc/shadow",
        f"file:{outside}",
        f"file:{credentials_dir}/../not-a-credential",
        f"file:{credentials_dir / 'link'}",
        f"file:{credentials_dir}",
        "file:relative/slurm.jwt",
        "file:/etc/gpu\x00portal",
        "vault:secret/slurm",
    ]


def test_the_api_refuses_references_outside_the_directory_or_the_prefix_naming_the_field(
    cast, credentials_dir, outside
):
    admin = _api(cast["admin"])
    for number, reference in enumerate(_refused_references(credentials_dir, outside)):
        body = {"name": f"s{number}", "kind": "slurm", "endpoint": "http://slurm:6820", "credentials_ref": reference}
        response = admin.post("/api/v1/orchestrators/", body, format="json")
        assert response.status_code == 400, reference
        assert list(response.json()) == ["credentials_ref"], reference
    (credentials_dir / "slurm.jwt").write_text(SECRET)
    for reference in ("env:GPUPORTAL_SECRET_SLURM_JWT", f"file:{credentials_dir}/sub/../slurm.jwt"):
        body = {"name": "ok", "kind": "slurm", "endpoint": "https://slurm:6820", "credentials_ref": reference}
        assert admin.post("/api/v1/orchestrators/", body, format="json").status_code == 201, reference
        Orchestrator.objects.filter(name="ok").delete()


def test_the_api_refuses_endpoints_that_are_not_http_naming_the_field(cast):
    admin = _api(cast["admin"])
    for endpoint in (
        "javascript:alert(1)",
        "file:///etc/passwd",
        "ftp://slurm/",
        "http://",
        "slurm:6820",
        "http://x:99999",
    ):
        body = {"name": "s1", "kind": "slurm", "endpoint": endpoint}
        response = admin.post("/api/v1/orchestrators/", body, format="json")
        assert response.status_code == 400 and list(response.json()) == ["endpoint"], endpoint
    existing = Orchestrator.objects.create(name="s2", kind="ray", endpoint="http://ray:8265")
    patched = admin.patch(f"/api/v1/orchestrators/{existing.pk}/", {"credentials_ref": "env:SECRET_KEY"}, format="json")
    assert patched.status_code == 400 and "GPUPORTAL_SECRET_" in patched.json()["credentials_ref"][0]


def test_the_admin_form_and_the_register_command_refuse_the_same_references(client, cast, credentials_dir):
    client.force_login(cast["admin"])
    form = {
        "name": "s1",
        "kind": "slurm",
        "endpoint": "javascript:alert(1)",
        "credentials_ref": "file:/etc/shadow",
        "enabled": "on",
        "options": "{}",
        "change_reason": "new cluster",
    }
    page = client.post("/admin/scheduling/orchestrator/add/", form)
    assert page.status_code == 200 and not Orchestrator.objects.filter(name="s1").exists()
    errors = page.context["adminform"].form.errors
    assert "inside" in errors["credentials_ref"][0] and "http" in errors["endpoint"][0]
    register = ["register_orchestrator", "--kind", "slurm", "--name", "s2", "--url", "http://s:6820"]
    with pytest.raises(CommandError, match="credentials_ref: env: only environment variables named GPUPORTAL_SECRET_"):
        call_command(*register, "--token-env", "SECRET_KEY")
    with pytest.raises(CommandError, match="credentials_ref: file: credentials files must lie inside"):
        call_command(*register, "--token-file", "/etc/shadow")


def test_a_row_written_around_the_model_is_refused_at_resolve_time_and_nothing_is_sent(
    echo_server, monkeypatch, settings
):
    url, received = echo_server
    settings.SECRET_KEY = "the-django-secret-key-value"
    monkeypatch.setenv("SECRET_KEY", settings.SECRET_KEY)
    orchestrator = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=url, credentials_ref="env:SECRET_KEY")
    collection.scrape(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert "only environment variables named GPUPORTAL_SECRET_" in orchestrator.last_error
    assert received == []


def test_a_symlink_swapped_in_after_saving_is_refused_at_resolve_time(credentials_dir, outside, echo_server, cast):
    url, received = echo_server
    token = credentials_dir / "slurm.jwt"
    token.write_text(SECRET)
    orchestrator, _ = collection.register_orchestrator(
        kind="slurm", name="hpc", url=url, credentials_ref=f"file:{token}", by=cast["admin"]
    )
    token.unlink()
    token.symlink_to(outside)
    collection.scrape(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert "credentials files must lie inside" in orchestrator.last_error
    assert received == []


def test_an_endpoint_written_around_the_model_is_refused_at_use(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    orchestrator = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint="file:///etc/passwd", credentials_ref=f"env:{SECRET_ENV}"
    )
    collection.scrape(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert orchestrator.last_error.startswith("endpoint: must be an http:// or https:// URL")
