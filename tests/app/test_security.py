import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def test_production_settings_pass_djangos_deploy_checks():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "ALLOWED_HOSTS": "gpuportal.example.org",
        "GPUPORTAL_VAR_DIR": str(ROOT / "var" / "deploycheck"),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests' live server, never in production
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_portal_refuses_to_start_without_a_secret_key_when_debug_is_off():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings", "DEBUG": "0", "SECRET_KEY": ""}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_pages_send_security_headers_and_secure_cookies(client, cast):
    response = client.post("/accounts/login/", {"username": "rita", "password": "pw"})
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] and response.cookies["sessionid"]["httponly"]
    page = client.get("/")
    assert page["X-Frame-Options"] == "DENY"
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["Referrer-Policy"] == "same-origin"


def test_forms_are_csrf_protected(cast):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/accounts/login/", {"username": "rita", "password": "pw"})
    assert response.status_code == 403


def test_api_session_writes_need_a_csrf_token_too(cast, queues):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(cast["admin"])
    response = strict.patch(
        f"/api/v1/queues/{queues['research'].pk}/", {"weight": "30", "reason": "x"}, content_type="application/json"
    )
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
