"""docker-compose.yml against the Compose Specification's own JSON schema, and the stack's promises.

compose-spec.json is schema/compose-spec.json of github.com/compose-spec/compose-spec (Apache-2.0) at
commit 170098ba07d9f53c383a41bfd4c5166b0a4529a6, stored unchanged: this machine runs no Docker, so the
schema `docker compose config` checks against is what we check against.
"""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parent / "compose-spec.json").read_text())
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())  # resolves the x-portal merge keys
SERVICES = COMPOSE["services"]
PORTAL = ("web", "worker", "collector", "beat")


def test_compose_file_is_valid_against_the_compose_spec_schema():
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    errors = sorted(jsonschema.Draft7Validator(SCHEMA).iter_errors(COMPOSE), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_the_schema_rejects_what_compose_rejects():
    """The check can fail: a misspelt depends_on condition is an error."""
    broken = {"services": {"web": {"image": "x", "depends_on": {"db": {"condition": "service_done"}}}}}
    assert list(jsonschema.Draft7Validator(SCHEMA).iter_errors(broken))


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_has_a_healthcheck(name):
    check = SERVICES[name].get("healthcheck")
    assert check, f"{name} has no healthcheck"
    if name == "migrate":  # a one-shot: exits when done, so the image's web probe is switched off
        assert check == {"disable": True}
    else:
        assert check["test"][0] in ("CMD", "CMD-SHELL") and len(check["test"]) > 1


@pytest.mark.parametrize("name", PORTAL)
def test_portal_services_start_after_migrate_and_healthy_services(name):
    depends = SERVICES[name]["depends_on"]
    assert depends["migrate"] == {"condition": "service_completed_successfully"}
    for service in ("db", "redis", "cache"):
        assert depends[service] == {"condition": "service_healthy"}


def test_migrate_is_one_shot_and_only_migrate_migrates():
    migrate = SERVICES["migrate"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    for name in PORTAL:
        assert "migrate" not in json.dumps(SERVICES[name]["command"])


def test_redis_memory_limits_are_kept():
    assert "--maxmemory-policy noeviction" in SERVICES["redis"]["command"]  # the broker never evicts a task
    assert "--maxmemory 256mb --maxmemory-policy allkeys-lru" in SERVICES["cache"]["command"]


@pytest.mark.parametrize("name", PORTAL)
def test_the_portal_counts_the_tls_proxy_in_front_so_clients_keep_their_own_address(name):
    # Issue 29 item 5: unset, every user behind the proxy shared its address for the sign-in lockout.
    assert SERVICES[name]["environment"]["GPUPORTAL_PROXY_COUNT"] == "${GPUPORTAL_PROXY_COUNT:-1}"


def test_scrapes_and_the_rest_are_served_by_separate_workers():
    """Issue 36: one slow orchestrator held every worker slot; scrapes now have a worker of their own."""
    collector = SERVICES["collector"]["command"]
    assert collector[collector.index("-Q") + 1] == "collect"
    queues = SERVICES["worker"]["command"][SERVICES["worker"]["command"].index("-Q") + 1]
    assert "collect" not in queues.split(",")
