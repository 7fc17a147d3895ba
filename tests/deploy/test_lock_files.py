"""requirements.lock (the image) and requirements-dev.lock (CI) pin, with hashes, every dependency that
pyproject.toml declares: a dependency added to pyproject.toml without re-locking fails here."""

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> set[str]:
    return {canonical(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in requirements}


def pins(name: str) -> dict[str, list[str]]:
    """package -> its hashes, for every `name==version` entry of a lock file."""
    found: dict[str, list[str]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", (REPO / name).read_text()):
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)", entry)
        if match:
            found[canonical(match.group(1))] = re.findall(r"--hash=sha256:[0-9a-f]{64}", entry)
    return found


@pytest.mark.parametrize(
    ("lock", "groups"),
    [
        ("requirements.lock", ("ldap",)),
        ("requirements-dev.lock", ("dev",)),
        ("requirements-dev-ldap.lock", ("dev", "ldap")),
    ],
    ids=["image", "ci", "ci-ldap"],
)
def test_lock_pins_every_declared_dependency_with_hashes(lock, groups):
    locked = pins(lock)
    wanted = declared(PROJECT["dependencies"])
    for group in groups:
        wanted |= declared(PROJECT["optional-dependencies"][group])
    assert wanted <= set(locked), f"not in {lock}: {sorted(wanted - set(locked))} (re-lock: docs/deployment.md)"
    assert all(locked.values()), f"pinned without a hash: {[n for n, h in locked.items() if not h]}"


def test_the_image_lock_leaves_the_dev_tools_out():
    assert not declared(["pytest", "ruff", "mypy", "playwright"]) & set(pins("requirements.lock"))


def test_both_locks_agree_on_every_shared_version():
    def versions(lock: str) -> dict[str, str]:
        text = (REPO / lock).read_text()
        return {canonical(n): v for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, re.MULTILINE)}

    locks = ("requirements.lock", "requirements-dev.lock", "requirements-dev-ldap.lock")
    image, ci, ci_ldap = (versions(lock) for lock in locks)
    assert {n: v for n, v in image.items() if ci_ldap.get(n) != v} == {}
    assert {n: v for n, v in ci.items() if ci_ldap.get(n) != v} == {}
