"""API permissions: authenticated to read what the user may see; writes need the rules permission."""

from django.conf import settings
from rest_framework import permissions


class ReadOrAdminWrite(permissions.IsAuthenticated):
    """Anyone signed in reads (querysets are already narrowed to visible teams); admins write."""

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.has_perm(view.write_permission)


class ApiDocsAccess(permissions.BasePermission):
    """The schema, Swagger UI and Redoc describe every endpoint and field: signed-in users only, unless
    GPUPORTAL_PUBLIC_API_DOCS opens them (read at each request, so a test or a reload can flip it)."""

    def has_permission(self, request, view):
        return settings.GPUPORTAL_PUBLIC_API_DOCS or bool(request.user and request.user.is_authenticated)
