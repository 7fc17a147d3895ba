"""Sign-in through the site's directory (django-auth-ldap) and OIDC provider (mozilla-django-oidc), and the
periodic re-sync of everyone who signed in that way.

Both backends create the user at the first sign-in and then hand the groups to ``identity.sync_memberships``.
Re-sync (``resync_identities``, a Celery beat task): an LDAP user's groups are searched again in the
directory; an OIDC user's last claims (kept from the last sign-in) are mapped again, so a mapping change
applies without a new sign-in but a group removed at the provider applies at the next sign-in (the provider
is asked only when the person is there). A directory that fails during a re-sync changes nothing.
"""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from scheduling.models import ExternalIdentity
from scheduling.services.identity import GroupRule, group_rules, sync_memberships

log = logging.getLogger(__name__)


class DirectoryUnavailable(RuntimeError):
    """The directory failed during a re-sync: memberships are kept as they were."""


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend keyed on the ``sub`` claim (an e-mail address may change hands); the
    ``GPUPORTAL_OIDC_GROUPS_CLAIM`` claim (``groups``) sets the memberships."""

    def filter_users_by_claims(self, claims):
        subject = claims.get("sub")
        if not subject:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(external_identity__provider="oidc", external_identity__subject=subject)

    def create_user(self, claims):
        username = portal_username(claims.get("preferred_username"), claims["sub"])
        user = self.UserModel.objects.create_user(username=username, email=claims.get("email", ""))
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        sync_memberships(user, provider="oidc", subject=claims["sub"], groups=_claimed_groups(claims))
        return user


def portal_username(preferred: object, subject: str) -> str:
    """The name an OIDC user gets: ``preferred_username`` if it obeys the rules of local user names (Django's:
    at most 150 letters, digits and @ . + - _; so no comma, space or NUL) and nobody holds it, else
    ``oidc-<sub>`` under the same rules. An existing account of that name (local, LDAP or another OIDC subject)
    is never entered: the sign-in is refused instead (a clean failure, not a 500)."""
    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    for candidate in (preferred, f"oidc-{subject}"):
        if not isinstance(candidate, str) or not candidate:
            continue
        try:
            field.clean(candidate, None)
        except ValidationError as error:
            log.warning("OIDC user name %r of subject %r refused: %s", candidate[:200], subject[:200], error.messages)
            continue
        if not get_user_model().objects.filter(username=candidate).exists():
            return candidate
    raise PermissionDenied(f"no usable portal user name for OIDC subject {subject[:200]!r}")


def _claimed_groups(claims) -> list[str]:
    groups = claims.get(settings.GPUPORTAL_OIDC_GROUPS_CLAIM, [])
    if isinstance(groups, str):
        return [groups]
    return [str(group) for group in groups] if isinstance(groups, list) else []


def resync_identities() -> dict[str, int]:
    """Re-sync every externally signed-in user; counts per provider (and ``failed``)."""
    counts = {"ldap": 0, "oidc": 0, "failed": 0}
    rules = group_rules()
    for identity in ExternalIdentity.objects.select_related("user"):
        try:
            resync(identity, rules)
            counts[identity.provider] += 1
        except DirectoryUnavailable as error:
            log.warning("identity re-sync of %s kept its memberships: %s", identity, error)
            counts["failed"] += 1
    return counts


def resync(identity: ExternalIdentity, rules: list[GroupRule]) -> None:
    is_ldap = identity.provider == ExternalIdentity.Provider.LDAP
    groups = _ldap_groups(identity.subject) if is_ldap else identity.groups  # OIDC: the last sign-in's claims
    sync_memberships(identity.user, provider=identity.provider, subject=identity.subject, groups=groups, rules=rules)


def _ldap_groups(username: str) -> list[str]:
    """The user's groups, searched in the directory now ([] when the directory no longer has the user)."""
    if not getattr(settings, "AUTH_LDAP_SERVER_URI", ""):
        raise DirectoryUnavailable("LDAP is not configured (GPUPORTAL_LDAP_SERVER_URI)")
    from scheduling.services.directory_ldap import PortalLDAPBackend, ldap_error  # python-ldap is an extra

    errors: list[Exception] = []

    def remember(sender, context, user, request=None, exception=None, **kwargs):
        errors.append(exception)

    ldap_error.connect(remember, dispatch_uid="gpuportal-ldap-resync")
    try:
        user = PortalLDAPBackend().populate_user(username)
    finally:
        ldap_error.disconnect(dispatch_uid="gpuportal-ldap-resync")
    if errors:
        raise DirectoryUnavailable(str(errors[0]))
    return sorted(user.ldap_user.group_names) if user is not None else []

