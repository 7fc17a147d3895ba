"""Token authentication with one query per request.

knox's own class also loads every other token of the user on each request to delete the expired ones
(a second query on every API call). Here a request reads only its own token: an expired token is still
refused and deleted when presented, and the user's other expired tokens are deleted when a new token
is created (``purge_expired_tokens``), so they still do not pile up.
"""

from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from knox.signals import token_expired


class SingleQueryTokenAuthentication(TokenAuthentication):
    def _cleanup_token(self, auth_token) -> bool:
        """knox's login path, with only the presented token checked for expiry (knox loads them all)."""
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


class SingleQueryTokenScheme(KnoxTokenScheme):
    """The OpenAPI schema describes these tokens as knox's ("Authorization: Token <token>")."""

    target_class = SingleQueryTokenAuthentication


def purge_expired_tokens(user) -> int:
    deleted, _ = user.auth_token_set.filter(expiry__lt=timezone.now()).delete()
    return deleted
