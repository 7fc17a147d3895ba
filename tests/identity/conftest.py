"""A real slapd (Debian's) with a seeded directory, started by ``scripts/ldap/start.sh`` for this package.

Own port (26389) and state directory, so it never meets another fixture; skipped with a reason when slapd
is not installed, a failure under CI=true (CI installs it with ``scripts/ldap/install.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import override_settings

from tests.support import require

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "ldap"
LDAP_PORT = "26389"
LDAP_STATE_DIR = "/tmp/gpuportal-ldap-tests"
SERVICES = "scheduling.services"


def _slapd_installed() -> bool:
    return bool(shutil.which("slapd") or Path("/usr/sbin/slapd").exists())


def _python_ldap_installed() -> bool:
    return importlib.util.find_spec("django_auth_ldap") is not None


@pytest.fixture(scope="session")
def slapd() -> dict[str, str]:
    """The started directory's KEY=VALUE facts (LDAP_URI, LDAP_BASE, LDAP_BIND_DN, LDAP_BIND_PASSWORD)."""
    require(_slapd_installed(), "needs Debian's slapd (bash scripts/ldap/install.sh)")
    require(_python_ldap_installed(), "needs the LDAP extra: make install-ldap (after bash scripts/ldap/install.sh)")
    env = {**os.environ, "LDAP_PORT": LDAP_PORT, "LDAP_STATE_DIR": LDAP_STATE_DIR}
    started = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 0, started.stderr
    facts = dict(line.split("=", 1) for line in started.stdout.splitlines() if "=" in line)
    yield facts
    subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=30, check=False)


def ldap_settings(facts: dict[str, str]) -> dict:
    """What settings.py builds from GPUPORTAL_LDAP_* for this directory."""
    import ldap
    from django.conf import settings
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

    base = facts["LDAP_BASE"]
    return {
        "AUTH_LDAP_SERVER_URI": facts["LDAP_URI"],
        "AUTH_LDAP_BIND_DN": facts["LDAP_BIND_DN"],
        "AUTH_LDAP_BIND_PASSWORD": facts["LDAP_BIND_PASSWORD"],
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(f"ou=people,{base}", ldap.SCOPE_SUBTREE, "(uid=%(user)s)"),
        "AUTH_LDAP_GROUP_SEARCH": LDAPSearch(f"ou=groups,{base}", ldap.SCOPE_SUBTREE, "(objectClass=groupOfNames)"),
        "AUTH_LDAP_GROUP_TYPE": GroupOfNamesType(),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_CACHE_TIMEOUT": 0,
        "AUTHENTICATION_BACKENDS": [*settings.AUTHENTICATION_BACKENDS, f"{SERVICES}.directory_ldap.PortalLDAPBackend"],
    }


@pytest.fixture
def ldap_signin(slapd):
    """LDAP sign-in switched on (as GPUPORTAL_LDAP_SERVER_URI does) against the live directory."""
    with override_settings(**ldap_settings(slapd)):
        yield slapd


@pytest.fixture
def directory(slapd):
    """An admin connection to the live directory, for tests that change group membership."""
    import ldap

    connection = ldap.initialize(slapd["LDAP_URI"])
    connection.simple_bind_s(slapd["LDAP_BIND_DN"], slapd["LDAP_BIND_PASSWORD"])
    changed: list[tuple[int, str, str]] = []

    class Directory:
        base = slapd["LDAP_BASE"]

        def remove_member(self, group: str, uid: str) -> None:
            self._modify(ldap.MOD_DELETE, group, uid)
            changed.append((ldap.MOD_ADD, group, uid))

        def add_member(self, group: str, uid: str) -> None:
            self._modify(ldap.MOD_ADD, group, uid)
            changed.append((ldap.MOD_DELETE, group, uid))

        def _modify(self, op: int, group: str, uid: str) -> None:
            member = f"uid={uid},ou=people,{self.base}".encode()
            connection.modify_s(f"cn={group},ou=groups,{self.base}", [(op, "member", [member])])

    yield Directory()
    for op, group, uid in reversed(changed):  # the session's directory is shared: put it back
        Directory()._modify(op, group, uid)
    connection.unbind_s()


OIDC_PORT = "26080"
OIDC_STATE_DIR = "/tmp/gpuportal-oidc-tests"
OIDC_SCRIPTS = REPO / "scripts" / "oidc"


@pytest.fixture(scope="session")
def oidc_provider() -> dict[str, str]:
    """A real OIDC provider process (django-oauth-toolkit, scripts/oidc/start.sh): its endpoints and client."""
    import sys

    require(shutil.which("openssl") is not None, "needs openssl to make the provider's RS256 key")
    env = {**os.environ, "OIDC_PORT": OIDC_PORT, "OIDC_STATE_DIR": OIDC_STATE_DIR, "PYTHON": sys.executable}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the provider is its own Django project
    started = subprocess.run(
        ["bash", str(OIDC_SCRIPTS / "start.sh")], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert started.returncode == 0, started.stderr
    facts = dict(line.split("=", 1) for line in started.stdout.splitlines() if "=" in line)
    facts["move_groups"] = lambda user, groups: subprocess.run(  # type: ignore[assignment]
        [sys.executable, str(OIDC_SCRIPTS / "seed.py"), "move", user, "--to", ",".join(groups)],
        env=env, check=True, capture_output=True, timeout=60,
    )
    yield facts
    subprocess.run(["bash", str(OIDC_SCRIPTS / "stop.sh")], env=env, capture_output=True, timeout=30, check=False)


@pytest.fixture
def oidc_signin(oidc_provider):
    """OIDC sign-in switched on (as GPUPORTAL_OIDC_* do) against the live provider."""
    from django.conf import settings

    with override_settings(
        OIDC_RP_CLIENT_ID=oidc_provider["OIDC_CLIENT_ID"],
        OIDC_RP_CLIENT_SECRET=oidc_provider["OIDC_CLIENT_SECRET"],
        OIDC_RP_SIGN_ALGO="RS256",
        OIDC_RP_SCOPES="openid email profile groups",
        OIDC_USE_PKCE=True,
        OIDC_OP_AUTHORIZATION_ENDPOINT=oidc_provider["OIDC_AUTHORIZATION_ENDPOINT"],
        OIDC_OP_TOKEN_ENDPOINT=oidc_provider["OIDC_TOKEN_ENDPOINT"],
        OIDC_OP_USER_ENDPOINT=oidc_provider["OIDC_USERINFO_ENDPOINT"],
        OIDC_OP_JWKS_ENDPOINT=oidc_provider["OIDC_JWKS_ENDPOINT"],
        AUTHENTICATION_BACKENDS=[*settings.AUTHENTICATION_BACKENDS, f"{SERVICES}.directory.PortalOIDCBackend"],
    ):
        yield oidc_provider


@pytest.fixture
def mapped_teams(db):
    """Teams vision and nlp, with the mappings a site would write for the seeded groups (LDAP and OIDC alike)."""
    from scheduling.models import GroupMapping, Membership, Team

    vision = Team.objects.create(slug="vision", name="Vision")
    nlp = Team.objects.create(slug="nlp", name="NLP")
    GroupMapping.objects.create(pattern="gpu-vision-*", team=vision, role=Membership.Role.RESEARCHER)
    GroupMapping.objects.create(pattern="GPU-VISION-LEADS", team=vision, role=Membership.Role.LEAD)
    GroupMapping.objects.create(pattern="nlp", team=nlp, role=Membership.Role.RESEARCHER)
    return {"vision": vision, "nlp": nlp}
