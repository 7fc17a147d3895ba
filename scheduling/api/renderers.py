"""DRF's browsable API with what its template needs from the Content-Security-Policy."""

from csp import constants as csp
from rest_framework import renderers

# rest_framework/base.html inlines pygments' <style> and a few style attributes; its scripts are files.
BROWSABLE_API_STYLES = {"style-src-elem": [csp.SELF, csp.UNSAFE_INLINE], "style-src-attr": [csp.UNSAFE_INLINE]}


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        response = (renderer_context or {}).get("response")
        if response is not None:
            response._csp_replace = BROWSABLE_API_STYLES  # read by django-csp's middleware
        return super().render(data, accepted_media_type, renderer_context)
