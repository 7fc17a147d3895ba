"""Cheaper reads for the list endpoints, with the same JSON as DRF's own code paths.

Profiling the load benchmark (``benchmarks/api_load.py``) showed a 100-row page spending most of its CPU in DRF's
per-field machinery (``get_attribute`` with its error handling, ``to_representation`` that turns an
``int`` into the same ``int``, a datetime's time zone looked up again for every value) and in a
``COUNT(*)`` that the first page often makes needless.
"""

from datetime import datetime
from operator import attrgetter

from django.core.paginator import Paginator
from django.db.models import F
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import fields as drf_fields
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.relations import RelatedField, SlugRelatedField
from rest_framework.settings import ISO_8601, api_settings

# Field types whose ``to_representation`` returns a value of this exact type unchanged.
PASSTHROUGH = (
    (drf_fields.BooleanField, bool),
    (drf_fields.IntegerField, int),
    (drf_fields.CharField, str),
    (drf_fields.FloatField, float),
)


def _iso_zone(field):
    """The zone a stock ISO 8601 ``DateTimeField`` shows aware values in, looked up once; else None."""
    stock = all(
        getattr(type(field), name) is getattr(drf_fields.DateTimeField, name)
        for name in ("to_representation", "enforce_timezone", "default_timezone")
    )
    if not (isinstance(field, drf_fields.DateTimeField) and stock):
        return None
    if getattr(field, "format", api_settings.DATETIME_FORMAT) != ISO_8601:
        return None
    return field.timezone if hasattr(field, "timezone") else field.default_timezone()


def _iso(value: datetime, zone) -> str:
    """DRF's ISO 8601 text of an aware datetime: in ``zone``, UTC written as ``Z``."""
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _passthrough_type(field) -> type | None:
    """The value type ``field`` returns unchanged, if its ``to_representation`` is the stock one."""
    if isinstance(field, drf_fields.ChoiceField):
        # A stored choice key comes back as is, unless some key differs from its string form.
        keys = field.choice_strings_to_values.values()
        stock = type(field).to_representation is drf_fields.ChoiceField.to_representation
        return str if stock and all(str(key) == key for key in keys) else None
    for field_class, value_type in PASSTHROUGH:
        if isinstance(field, field_class) and type(field).to_representation is field_class.to_representation:
            return value_type
    return None


class _Reader:
    """How one field reads one instance: a plain attribute path and, where safe, no conversion."""

    __slots__ = ("exact", "field", "get", "name", "slug", "zone")

    def __init__(self, field) -> None:
        self.name, self.field = field.field_name, field
        slug = isinstance(field, SlugRelatedField)
        # Other related fields read only the key (DRF's pk-only shortcut): left to DRF.
        stock = type(field).get_attribute is drf_fields.Field.get_attribute or slug
        simple = stock and field.source != "*" and (slug or not isinstance(field, RelatedField))
        self.get = attrgetter(".".join(field.source_attrs)) if simple else None
        self.exact = _passthrough_type(field)
        self.slug = attrgetter(field.slug_field.replace("__", ".")) if slug else None
        self.zone = _iso_zone(field)

    def read(self, instance):
        if self.get is None:
            return _drf_read(self.field, instance)
        try:
            value = self.get(instance)
        except Exception:  # a missing related object, a default to apply: DRF's own rules decide
            return _drf_read(self.field, instance)
        if value is None:
            return None
        if callable(value) and not isinstance(value, type):
            return _drf_read(self.field, instance)
        if self.slug is not None:
            return self.slug(value)
        if self.exact is not None and type(value) is self.exact:
            return value
        if self.zone is not None and type(value) is datetime and value.tzinfo is not None:
            try:
                return _iso(value, self.zone)
            except OverflowError:  # DRF turns it into a validation error: let it
                return self.field.to_representation(value)
        return self.field.to_representation(value)


_SKIP = object()


def _drf_read(field, instance):
    try:
        attribute = field.get_attribute(instance)
    except drf_fields.SkipField:
        return _SKIP
    check = attribute.pk if isinstance(attribute, serializers.PKOnlyObject) else attribute
    return None if check is None else field.to_representation(attribute)


class RelatedName(serializers.CharField):
    """A related row's name or slug (read-only). Read from the annotation ``<field>_<attr>`` when the
    queryset carries one (``annotate(orchestrator_name=F("orchestrator__name"))``): a list page then
    builds no related model per row. Without the annotation it follows the relation."""

    def __init__(self, attr: str, **kwargs) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)
        self.attr = attr

    def get_attribute(self, instance):
        annotated = f"{self.field_name}_{self.attr}"
        if annotated in instance.__dict__:
            return instance.__dict__[annotated]
        related = getattr(instance, self.field_name)
        return None if related is None else getattr(related, self.attr)


def related_names(**fields: str) -> dict:
    """``annotate`` arguments for ``RelatedName`` fields: ``related_names(orchestrator="name")``."""
    return {f"{field}_{attr}": F(f"{field}__{attr}") for field, attr in fields.items()}


class FastReadMixin:
    """``to_representation`` through readers built once per serializer instance (so once per page)."""

    def to_representation(self, instance):
        readers = self.__dict__.get("_readers")
        if readers is None:
            readers = self.__dict__["_readers"] = [_Reader(f) for f in self.fields.values() if not f.write_only]
        row = {}
        for reader in readers:
            value = reader.read(instance)
            if value is not _SKIP:
                row[reader.name] = value
        return row


class FirstPagePaginator(Paginator):
    """Asks the database for a count only when the first page is full: a first page holding fewer rows
    than a page is the whole result, so its length is the count."""

    def page(self, number):
        if str(number) != "1":
            return super().page(number)
        rows = list(self.object_list[: self.per_page + 1])
        if len(rows) <= self.per_page:
            self.__dict__["count"] = len(rows)
        return self._get_page(rows[: self.per_page], 1, self)


class PageNumberPagination(PageNumberPagination):
    django_paginator_class = FirstPagePaginator


class FilterBackend(DjangoFilterBackend):
    """django-filter's backend, skipped when no query parameter could belong to a filter: the FilterSet
    would build and validate a form only to return the queryset unchanged (a tenth of a list's CPU), and
    for ``filterset_fields`` django-filter also builds a new FilterSet class on every request.
    A parameter counts when it starts with a filter's name (``x__gte`` for ``x``, range widgets' ``_min``)."""

    def filter_queryset(self, request, queryset, view):
        names = _filter_names(view)
        if not any(param.startswith(names) for param in request.query_params):
            return queryset
        return super().filter_queryset(request, queryset, view)


def _filter_names(view) -> tuple[str, ...]:
    """The names the view's filters answer to, read off the view without building a FilterSet."""
    filterset_class = getattr(view, "filterset_class", None)
    if filterset_class is not None:
        return tuple(filterset_class.base_filters)
    return tuple(getattr(view, "filterset_fields", None) or ())
