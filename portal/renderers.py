"""The API's JSON answers."""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer


class JsonRenderer(JSONRenderer):
    """DRF's JSON renderer; an answer quoting a lone surrogate a client sent (as the JSON or YAML escape
    `\\ud800`) writes it back as that escape.

    UTF-8 has no bytes for a lone surrogate, so an error naming an unknown key or
    choice that held one was a 500. Every other answer is rendered as before,
    with its text as UTF-8.
    """

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            self.ensure_ascii = True  # this instance serves this one response
            return super().render(data, accepted_media_type, renderer_context)
