"""Token authentication with one query per request, and that query's SQL written once.

knox's own class also loads every other token of the user on each request to delete the expired ones
(a second query on every API call). Here a request reads only its own token: an expired token is still
refused and deleted when presented, and the user's other expired tokens are deleted when a new token
is created (``purge_expired_tokens``), so they still do not pile up.

knox looks the token up with ``filter(token_key=...).select_related("user")``, which Django compiles to
SQL anew on every request: a third of the CPU of a stored API list answer (api/list_cache.py). The same
join is built once here from both models' columns, and the rows become model instances with
``from_db`` as the ORM would make them; knox's checks (expiry, digest, active user, refresh) are its own.
"""

import binascii
import functools
from hmac import compare_digest

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.authentication import BasicScheme
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.models import get_token_model
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework import exceptions
from rest_framework.authentication import BasicAuthentication

from scheduling.limits import NUL
from scheduling.services.accounts import lockout_for


@functools.cache
def _token_and_user_query() -> tuple[str, tuple[str, ...], tuple[str, ...], tuple]:
    """SELECT of a token and its user by token key, the attribute names of each part's columns, and each
    column's converters (SQLite hands back datetimes as naive text; the ORM's converters make them aware)."""
    token_model, user_model = get_token_model(), get_user_model()
    quote = connection.ops.quote_name
    token_fields, user_fields = token_model._meta.concrete_fields, user_model._meta.concrete_fields
    columns = [f"t.{quote(f.column)}" for f in token_fields] + [f"u.{quote(f.column)}" for f in user_fields]
    token_table, user_table = quote(token_model._meta.db_table), quote(user_model._meta.db_table)
    user_id, user_pk = quote(token_model._meta.get_field("user").column), quote(user_model._meta.pk.column)
    token_key = quote(token_model._meta.get_field("token_key").column)
    # Identifiers come from the models' metadata; the only value, the key, is a query parameter.
    sql = (
        f"SELECT {', '.join(columns)} FROM {token_table} t JOIN {user_table} u ON u.{user_pk} = t.{user_id}"  # nosec B608 - model metadata
        f" WHERE t.{token_key} = %s"
    )
    converters = tuple(_converters(field) for field in (*token_fields, *user_fields))
    return sql, tuple(f.attname for f in token_fields), tuple(f.attname for f in user_fields), converters


def _converters(field) -> tuple:
    """What the ORM would apply to this column's raw value (the backend's converters, then the field's),
    with the column expression each converter is called with."""
    expression = field.get_col(field.model._meta.db_table)
    found = [*connection.ops.get_db_converters(expression), *field.get_db_converters(connection)]
    return tuple((convert, expression) for convert in found)


def _converted(row, converters) -> list:
    values = list(row)
    for index, column_converters in enumerate(converters):
        for convert, expression in column_converters:
            values[index] = convert(values[index], expression, connection)
    return values


def tokens_with_key(key: str) -> list:
    """The tokens whose first characters are ``key``, each with its user loaded (one query)."""
    sql, token_names, user_names, converters = _token_and_user_query()
    token_model, user_model = get_token_model(), get_user_model()
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        rows = cursor.fetchall()
    split = len(token_names)
    tokens = []
    for raw in rows:
        row = _converted(raw, converters)
        token = token_model.from_db(connection.alias, token_names, row[:split])
        token.user = user_model.from_db(connection.alias, user_names, row[split:])
        tokens.append(token)
    return tokens


class SingleQueryTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, token: bytes):
        """knox's loop over the candidate tokens, over ``tokens_with_key`` instead of a compiled queryset."""
        text = token.decode("utf-8")
        for auth_token in tokens_with_key(text[: CONSTANTS.TOKEN_KEY_LENGTH]):
            if self._cleanup_token(auth_token):
                continue
            try:
                digest = hash_token(text)
            except (TypeError, binascii.Error):
                raise exceptions.AuthenticationFailed(_("Invalid token.")) from None
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise exceptions.AuthenticationFailed(_("Invalid token."))

    def _cleanup_token(self, auth_token) -> bool:
        """knox's login path, with only the presented token checked for expiry (knox loads them all)."""
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


class SignInLocked(exceptions.APIException):
    """429 with Retry-After (DRF's handler sets it from ``wait``) while a lockout cools off."""

    status_code = 429
    default_code = "locked_out"

    def __init__(self, detail: str, wait: int) -> None:
        super().__init__(detail)
        self.wait = wait


class LockoutAwareBasicAuthentication(BasicAuthentication):
    """HTTP basic auth for the token endpoint. django-axes counts its failures (Django's ``authenticate``
    gets the request) and refuses a locked-out caller; this says so, and when to retry, instead of a
    plain "Invalid username/password" that would invite the next guess."""

    def authenticate_credentials(self, userid, password, request=None):
        if NUL in userid or NUL in password:  # no account has one; PostgreSQL cannot even look it up (a 500)
            raise exceptions.AuthenticationFailed("Invalid username/password.")
        try:
            return super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            if not getattr(request, "axes_locked_out", False):
                raise
            lockout = lockout_for(request)
            if lockout.retry_after_s is None:
                raise exceptions.PermissionDenied(lockout.message, code="locked_out") from None
            raise SignInLocked(lockout.message, lockout.retry_after_s) from None


class SingleQueryTokenScheme(KnoxTokenScheme):
    """The OpenAPI schema describes these tokens as knox's ("Authorization: Token <token>")."""

    target_class = SingleQueryTokenAuthentication


class LockoutAwareBasicScheme(BasicScheme):
    """The schema describes the token endpoint's basic auth as plain HTTP basic."""

    target_class = LockoutAwareBasicAuthentication


def purge_expired_tokens(user) -> int:
    deleted, _ = user.auth_token_set.filter(expiry__lt=timezone.now()).delete()
    return deleted
