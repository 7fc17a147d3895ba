"""API permissions: authenticated to read what the user may see; writes need the rules permission."""

from rest_framework import permissions


class ReadOrAdminWrite(permissions.IsAuthenticated):
    """Anyone signed in reads (querysets are already narrowed to visible teams); admins write."""

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.has_perm(view.write_permission)
