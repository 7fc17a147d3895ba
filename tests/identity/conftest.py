"""A real slapd (Debian's) with a seeded directory, started by ``scripts/ldap/start.sh`` for this package.

Own port (36389) and state directory, so it never meets another fixture; skipped with a reason when slapd
is not installed, a failure under CI=true (CI installs it with ``scripts/ldap/install.sh``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import override_settings

from tests.support import require

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "ldap"
LDAP_PORT = "36389"
LDAP_STATE_DIR = "/tmp/gpuportal-ldap-tests"
SERVICES = "scheduling.services"


def _slapd_installed() -> bool:
    return bool(shutil.which("slapd") or Path("/usr/sbin/slapd").exists())


@pytest.fixture(scope="session")
def slapd() -> dict[str, str]:
    """The started directory's KEY=VALUE facts (LDAP_URI, LDAP_BASE, LDAP_BIND_DN, LDAP_BIND_PASSWORD)."""
    require(_slapd_installed(), "needs Debian's slapd (bash scripts/ldap/install.sh)")
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
        "AUTHENTICATION_BACKENDS": [*settings.AUTHENTICATION_BACKENDS, f"{SERVICES}.directory.PortalLDAPBackend"],
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
