"""The production Dockerfile, read as text (this machine runs no Docker): multi-stage, installs the
lock file with hashes, runs as a non-root user, has a HEALTHCHECK, never migrates in its command, and
installs the Debian packages the CI scripts install (so the image runs what the tests ran)."""

import json
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What the CI scripts install that the image leaves out, and why. Each must still be in a CI list: a
# package renamed there fails test_apt_packages_are_the_ci_scripts_packages until this is looked at.
REPORT_TEST_ONLY = {"poppler-utils": "pdftotext reads the PDF back in tests; the portal never runs it"}
SLURM_NOT_IN_IMAGE = {
    "slurmrestd": "the portal is slurmrestd's client over HTTP, not its host",
    "slurm-wlm-jwt-plugin": "a slurmctld/slurmrestd plugin (the portal only sends the token)",
    "slurmdbd": "the accounting daemon runs on the Slurm controller",
    "mariadb-server": "slurmdbd's database, on the Slurm side",
    "mariadb-client": "only start.sh talks to MariaDB",
    "debootstrap": "builds the Slurm 24.11 test root in CI",
}


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


DOCKERFILE = instructions((REPO / "Dockerfile").read_text())
FINAL_STAGE = DOCKERFILE[max(i for i, (kw, _) in enumerate(DOCKERFILE) if kw == "FROM") :]


def final(keyword: str) -> list[str]:
    return [rest for kw, rest in FINAL_STAGE if kw == keyword]


def apt_installed(run: str) -> set[str]:
    """Package names of every `apt-get install` in one RUN (options and the next `&&` command excluded)."""
    packages: set[str] = set()
    for command in re.split(r"&&|;", run):
        words = shlex.split(command)
        if "apt-get" in words and "install" in words:
            packages |= {w for w in words[words.index("install") + 1 :] if not w.startswith("-")}
    return packages


def ci_report_packages() -> set[str]:
    return set(re.findall(r"missing\+=\(([\w.+-]+)\)", (REPO / "scripts/ci/install-report-deps.sh").read_text()))


def ci_slurm_packages() -> set[str]:
    match = re.search(r"^PACKAGES=\(([^)]*)\)", (REPO / "scripts/slurm/install.sh").read_text(), re.MULTILINE)
    assert match, "scripts/slurm/install.sh has no PACKAGES=(...) list"
    return set(match.group(1).split())


def test_multi_stage_build_copies_only_the_venv_from_the_build_stage():
    stages = [rest for kw, rest in DOCKERFILE if kw == "FROM"]
    assert len(stages) >= 2 and stages[0].endswith(" AS build")
    assert all(rest.startswith("python:3.11-slim-bookworm") for rest in stages)  # Debian 12: Slurm 22.05
    assert "--from=build /opt/venv /opt/venv" in final("COPY")


def test_dependencies_come_from_the_hashed_lock_file():
    runs = " ".join(rest for kw, rest in DOCKERFILE if kw == "RUN")
    assert "pip install --require-hashes --no-deps -r /tmp/requirements.lock" in runs
    assert "COPY requirements.lock /tmp/requirements.lock" in [f"{kw} {rest}" for kw, rest in DOCKERFILE]


def test_runs_as_a_non_root_user():
    users = final("USER")
    assert users, "the final stage sets no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    last_user = max(i for i, (kw, _) in enumerate(FINAL_STAGE) if kw == "USER")
    assert last_user > max(i for i, (kw, _) in enumerate(FINAL_STAGE) if kw == "RUN")  # nothing runs as root after


def test_has_a_healthcheck_on_the_portal_health_endpoint():
    (check,) = final("HEALTHCHECK")
    assert "CMD" in check and "NONE" not in check
    assert '"gpuportal-healthcheck", "web"' in check
    assert "/health" in (REPO / "deploy/docker/healthcheck.py").read_text()


def test_the_command_never_migrates():
    (cmd,) = final("CMD")
    command = json.loads(cmd)
    assert command[0] == "gunicorn" and "migrate" not in command
    assert not any("migrate" in rest for kw, rest in FINAL_STAGE if kw in ("ENTRYPOINT", "CMD"))


def test_apt_packages_are_the_ci_scripts_packages():
    image = set().union(*(apt_installed(run) for run in final("RUN")))
    report, slurm = ci_report_packages(), ci_slurm_packages()
    assert report and slurm, "a CI script's package list was not found"
    assert set(REPORT_TEST_ONLY) <= report and set(SLURM_NOT_IN_IMAGE) <= slurm
    ldap_runtime = {"libldap-2.5-0"}  # what scripts/ldap/install.sh's libldap-dev depends on, built against
    assert image == (report - set(REPORT_TEST_ONLY)) | (slurm - set(SLURM_NOT_IN_IMAGE)) | ldap_runtime


def test_the_build_stage_has_the_headers_python_ldap_compiles_against():
    build = [rest for kw, rest in DOCKERFILE[: DOCKERFILE.index(FINAL_STAGE[0])] if kw == "RUN"]
    headers = set().union(*(apt_installed(run) for run in build))
    ci = re.search(r"^PACKAGES=\(([^)]*)\)", (REPO / "scripts/ldap/install.sh").read_text(), re.MULTILINE)
    assert ci, "scripts/ldap/install.sh has no PACKAGES=(...) list"
    assert {"libldap-dev", "libsasl2-dev"} <= headers & set(ci.group(1).split())
    assert "gcc" in headers


def test_apt_parser_reads_options_and_chained_commands():
    run = "apt-get update && apt-get install -y -q --no-install-recommends a b && rm -rf /x"
    assert apt_installed(run) == {"a", "b"}
