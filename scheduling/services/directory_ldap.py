"""LDAP sign-in (django-auth-ldap). Its own module because python-ldap is an extra (``pip install .[ldap]``,
``make install-ldap``): it compiles against libldap-dev, so it is imported only where LDAP is switched on."""

from django_auth_ldap.backend import LDAPBackend, ldap_error

from scheduling.services.identity import sync_memberships

__all__ = ["PortalLDAPBackend", "ldap_error"]


class PortalLDAPBackend(LDAPBackend):
    """django-auth-ldap's backend; after a successful bind, the user's LDAP groups set their memberships.

    A local account (one with a password of its own: a break-glass admin) is never signed in through the
    directory, so a directory entry of the same name cannot take it over."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        local = self.get_user_model().objects.filter(username=username).first() if username else None
        if local is not None and local.has_usable_password():
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            sync_memberships(user, provider="ldap", subject=user.get_username(), groups=ldap_user.group_names)
        return user
