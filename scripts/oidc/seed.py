"""Seed the test provider: users with groups, and the portal as a confidential RS256 client.

Users (password "secret-<name>"): alice in gpu-vision-leads and gpu-vision-users, bob in gpu-vision-users
and nlp, carol in nlp. Groups change with ``seed.py move USER --to G1,G2`` while the provider runs.
"""

import os
import sys

import django

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provider.settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402

USERS = {
    "alice": ["gpu-vision-leads", "gpu-vision-users"],
    "bob": ["gpu-vision-users", "nlp"],
    "carol": ["nlp"],
}


def set_groups(username: str, names: list[str]) -> None:
    user = User.objects.get(username=username)
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])


def seed(client_id: str, client_secret: str, redirect_uris: str) -> None:
    for username, groups in USERS.items():
        user = User.objects.create_user(username, f"{username}@gpuportal.test", f"secret-{username}")
        set_groups(user.username, groups)
    Application.objects.create(
        name="gpuportal",
        client_id=client_id,
        client_secret=client_secret,  # hashed on save; the portal keeps the plain one
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uris,
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,  # no consent page: the tests sign in, they do not consent
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["move"]:
        set_groups(sys.argv[2], [g for g in sys.argv[4].split(",") if g])
    else:
        seed(os.environ["OIDC_CLIENT_ID"], os.environ["OIDC_CLIENT_SECRET"], os.environ["OIDC_REDIRECT_URIS"])
