"""Request bodies (JSON, forms, multipart) parsed as DRF does, then refused with a 400 naming the field when
they hold what the database cannot store: a NUL character (PostgreSQL refuses it in text and jsonb) or JSON
nested deeper than ``MAX_JSON_DEPTH`` (a thousand levels made ``json`` raise RecursionError: a 500).

Checked once here, for every view and field, rather than field by field: a NUL inside a JSONField value or
a key would pass any per-field validator that looks only at plain strings."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.settings import api_settings

from scheduling.limits import DEPTH_RULE, MAX_JSON_DEPTH, json_path, json_problem

__all__ = ["MAX_JSON_DEPTH", "FormParser", "JSONParser", "MultiPartParser"]


def _refuse_unstorable(document: object) -> None:
    problem = json_problem(document)
    if problem is None:
        return
    path, rule = problem
    if not path or not isinstance(path[0], str):
        raise ParseError({api_settings.NON_FIELD_ERRORS_KEY: [rule]})
    raise ParseError({path[0]: [rule if len(path) == 1 else f"{json_path(path)}: {rule}"]})


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError({api_settings.NON_FIELD_ERRORS_KEY: [DEPTH_RULE]}) from None
        _refuse_unstorable(document)
        return document


class FormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        _refuse_unstorable({key: values for key, values in data.lists()})
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        _refuse_unstorable({key: values for key, values in parsed.data.lists()})  # files are bytes: any byte goes
        return parsed
