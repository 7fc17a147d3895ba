"""Token authentication with one query per request.

knox's own class also loads every other token of the user on each request to delete the expired ones
(a second query on every API call). Here a request reads only its own token: an expired token is still
refused and deleted when presented, and the user's other expired tokens are deleted when a new token
is created (``purge_expired_tokens``), so they still do not pile up.
"""

import binascii
from hmac import compare_digest

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.models import get_token_model
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework import exceptions


class SingleQueryTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, token: bytes):
        message = _("Invalid token.")
        text = token.decode("utf-8")
        candidates = get_token_model().objects.filter(token_key=text[: CONSTANTS.TOKEN_KEY_LENGTH])
        for auth_token in candidates.select_related("user"):
            if self._expired(auth_token):
                continue
            try:
                digest = hash_token(text)
            except (TypeError, binascii.Error) as error:
                raise exceptions.AuthenticationFailed(message) from error
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise exceptions.AuthenticationFailed(message)

    def _expired(self, auth_token) -> bool:
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
