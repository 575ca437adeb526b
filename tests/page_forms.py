"""A page's form as a browser would post it, for tests that open a page, wait, and save it later."""

from __future__ import annotations

from html.parser import HTMLParser


class _Form(HTMLParser):
    def __init__(self):
        super().__init__()
        self.values: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def _add(self, name: str, value: str) -> None:
        self.values.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        name = attrs.get("name")
        if tag == "input" and name and attrs.get("type") not in ("submit", "button", "file"):
            if attrs.get("type") in ("checkbox", "radio") and "checked" not in attrs:
                return
            self._add(name, attrs.get("value") or ("on" if attrs.get("type") == "checkbox" else ""))
        elif tag == "select" and name:
            self._select = name
            self.values.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in attrs:
            self._add(self._select, attrs.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea = name
            self._add(name, "")

    def handle_data(self, data):
        if self._textarea:
            self.values[self._textarea][-1] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form_fields(html: str) -> dict:
    """Every field the page's forms would post: a name given once maps to its value, a multiple
    select to its list of values (the Django test client posts lists as repeated fields)."""
    form = _Form()
    form.feed(html)
    return {name: values[0] if len(values) == 1 else values for name, values in form.values.items()}


def opened(client, url: str) -> dict:
    """The fields of the page at `url` as `client` opens it (which must be allowed)."""
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return form_fields(response.content.decode())
