"""LDAP sign-in (django-auth-ldap). Its own module because python-ldap is an extra (``pip install .[ldap]``,
``make install-ldap``): it compiles against libldap-dev, so it is imported only where LDAP is switched on."""

from django_auth_ldap.backend import LDAPBackend, ldap_error

from scheduling.services.identity import owned_elsewhere, sync_memberships

__all__ = ["PortalLDAPBackend", "ldap_error"]


class PortalLDAPBackend(LDAPBackend):
    """django-auth-ldap's backend; after a successful bind, the user's LDAP groups set their memberships.

    An account of another identity source (a local one with a password of its own, a break-glass admin; one
    made by an OIDC sign-in) is never signed in through the directory, so a directory entry of the same name
    cannot take it over (``identity.owned_elsewhere``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        existing = self.get_user_model().objects.filter(username=username).first() if username else None
        if existing is not None and owned_elsewhere(existing, "ldap"):
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            sync_memberships(user, provider="ldap", subject=user.get_username(), groups=ldap_user.group_names)
        return user
