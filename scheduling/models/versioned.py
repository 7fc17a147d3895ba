"""Optimistic concurrency: a version on every row an admin or a lead edits from a page that may be old.

Issue 36: an admin's save of a form loaded before another admin's undid the other's edit, and a lead's
approval granted what alice had amended since the page loaded. Each save of a versioned row adds one to
``version``; an edit carries the version it was made on (a hidden form field, ``If-Match`` on the API) and
``scheduling.services.versions`` refuses it, with what changed, when the row has moved on.
"""

from django.db import models


class Versioned(models.Model):
    version = models.PositiveIntegerField(default=1, editable=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            self.version += 1
            update_fields = kwargs.get("update_fields")
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "version"}
        super().save(*args, **kwargs)
