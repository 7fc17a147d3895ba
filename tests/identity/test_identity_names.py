"""Issue 29 item 9: OIDC user names obey the rules of local ones, and no identity source enters an account of
another (no provider process needed: the backend's own user creation, with the claims a verified token gives)."""

import pytest
from django.core.exceptions import PermissionDenied
from django.test import override_settings
from django.utils import timezone

from scheduling.engine.governance_state import GovernanceInput, GovOrchestrator, GovTeam, desired_state
from scheduling.engine.types import OrchestratorKind
from scheduling.models import ExternalIdentity
from scheduling.services.directory import PortalOIDCBackend, portal_username
from scheduling.services.identity import owned_elsewhere

pytestmark = pytest.mark.django_db

OIDC = {
    "OIDC_RP_CLIENT_ID": "gpuportal",
    "OIDC_RP_CLIENT_SECRET": "s",
    "OIDC_RP_SIGN_ALGO": "RS256",
    "OIDC_OP_TOKEN_ENDPOINT": "https://login.example.org/token",
    "OIDC_OP_USER_ENDPOINT": "https://login.example.org/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://login.example.org/jwks",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://login.example.org/authorize",
}


@pytest.mark.parametrize("preferred", ["eve,alice", "e" * 151, "eve alice", "eve\x00", "", None, ["eve"]])
def test_a_preferred_username_a_local_account_could_not_have_is_not_taken(preferred):
    assert portal_username(preferred, "2f9c") == "oidc-2f9c"


def test_a_valid_free_preferred_username_is_kept():
    assert portal_username("eve.smith", "2f9c") == "eve.smith"


def test_no_usable_name_is_a_clean_refusal_not_a_500(django_user_model):
    django_user_model.objects.create_user("eve")
    with pytest.raises(PermissionDenied, match="no usable portal user name"):
        portal_username("eve", "x" * 200)  # taken, and oidc-<sub> is over 150 characters


@override_settings(**OIDC)
def test_the_oidc_backend_creates_the_user_under_the_checked_name(django_user_model):
    user = PortalOIDCBackend().create_user({"sub": "2f9c", "preferred_username": "eve,alice", "groups": []})
    assert user.username == "oidc-2f9c" and not django_user_model.objects.filter(username="eve,alice").exists()
    assert ExternalIdentity.objects.get(user=user).provider == "oidc"


@override_settings(**OIDC)
def test_an_account_made_by_oidc_is_never_entered_by_the_directory_user_of_that_name(django_user_model):
    made_by_oidc = PortalOIDCBackend().create_user({"sub": "77", "preferred_username": "mallory", "groups": []})
    assert owned_elsewhere(made_by_oidc, "ldap")  # PortalLDAPBackend refuses it before any bind
    assert not owned_elsewhere(made_by_oidc, "oidc")
    local = django_user_model.objects.create_user("root-admin", password="pw")
    assert owned_elsewhere(local, "ldap") and owned_elsewhere(local, "oidc")
    by_ldap = django_user_model.objects.create_user("dana")
    by_ldap.set_unusable_password()
    by_ldap.save()
    ExternalIdentity.objects.create(user=by_ldap, provider="ldap", subject="dana", synced_at=timezone.now())
    assert not owned_elsewhere(by_ldap, "ldap") and owned_elsewhere(by_ldap, "oidc")


def test_a_member_name_slurm_refuses_is_left_out_of_slurm_alone():
    hpc = GovOrchestrator("hpc", OrchestratorKind.SLURM)
    teams = (GovTeam("nlp", None, ("alice", "eve,alice")),)
    state = desired_state(GovernanceInput(teams, ()), [hpc], 0.0)["hpc"]
    assert {o.key for o in state.objects if o.kind == "slurm_user"} == {"nlp/alice"}
    assert [p.message for p in state.skipped] == [
        "hpc: user 'eve,alice' is not a Slurm user name (letters, digits, '_', '.' and '-', not starting with '.' "
        "or '-', at most 64 characters)"
    ]
