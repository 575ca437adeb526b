"""The token: read from the environment or a file, never printed, sent only over https (or plain http to
this machine), and never carried along a redirect."""

from __future__ import annotations

import pytest

from tests.cli.fake_portal import Answer, FakePortal, job

SECRET = "gw_S3cretTokenValue"


@pytest.fixture
def portal(fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(200, job(7)))
    return fake_portal


def sent_token(portal) -> str:
    return portal.requests[-1].headers["Authorization"]


def test_a_secret_with_a_trailing_newline_is_sent_without_it(cli, portal):
    result = cli("status", "7", env={"GANGWAY_TOKEN": SECRET + "\n"})
    assert result.code == 0, result.err
    assert sent_token(portal) == f"Bearer {SECRET}"


def test_a_token_with_a_line_break_inside_is_refused_without_showing_it(cli, portal):
    result = cli("status", "7", env={"GANGWAY_TOKEN": "gw_S3cret\nTokenValue"})
    assert result.code == 2 and "the token from $GANGWAY_TOKEN has spaces or control characters" in result.err
    assert "S3cret" not in result.out + result.err and not portal.requests


def test_a_token_with_a_character_no_header_carries_is_refused_without_showing_it(cli, portal):
    result = cli("status", "7", env={"GANGWAY_TOKEN": "gw_S3cret\u201cTokenValue\u201d"})  # curly quotes pasted in
    assert result.code == 2 and "characters other than ASCII; check the secret" in result.err
    assert "S3cret" not in result.out + result.err and not portal.requests


@pytest.mark.parametrize("where", ["GANGWAY_TOKEN_FILE", "--token-file"])
def test_the_token_can_come_from_a_file(cli, portal, tmp_path, where):
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    if where == "--token-file":
        result = cli("status", "7", "--token-file", str(path), env={"GANGWAY_TOKEN": None})
    else:
        result = cli("status", "7", env={"GANGWAY_TOKEN": None, "GANGWAY_TOKEN_FILE": str(path)})
    assert result.code == 0, result.err
    assert sent_token(portal) == f"Bearer {SECRET}"


def test_a_token_file_that_cannot_be_read_is_a_usage_error(cli, portal, tmp_path):
    result = cli("status", "7", "--token-file", str(tmp_path / "missing"))
    assert result.code == 2 and "cannot read the token file" in result.err and not portal.requests


def test_the_token_is_never_printed(cli, fake_portal):
    fake_portal.on("GET", "/api/v1/jobs/7/", Answer(401, {"detail": "Invalid token."}))
    result = cli("status", "7", env={"GANGWAY_TOKEN": SECRET})
    assert result.code == 4 and "Invalid token." in result.err
    assert SECRET not in result.out + result.err


@pytest.mark.parametrize("url", ["http://gangway.invalid", "http://10.0.0.5:8000"])
def test_plain_http_to_another_host_is_refused(cli, url):
    result = cli("queue", env={"GANGWAY_URL": url})
    assert result.code == 2
    assert "refusing to send the token over plain http" in result.err and "--allow-http" in result.err


def test_plain_http_to_another_host_goes_when_asked(cli):
    result = cli("queue", env={"GANGWAY_URL": "http://gangway.invalid", "GANGWAY_ALLOW_HTTP": "1"})
    assert result.code == 7 and "Cannot reach http://gangway.invalid/" in result.err


@pytest.mark.parametrize("url, said", [
    ("gangway.example.com", "not a portal URL: 'gangway.example.com'"),
    ("file:///etc/passwd", "not a portal URL"),
    ("https://ci:hunter2@gangway.example.com", "holds a user name or password"),
    ("http://127.0.0.1:80a", "not a portal URL: 'http://127.0.0.1:80a'"),
    ("http://127.0.0.1:70000", "not a portal URL"),
    ("http://[::1:8000", "not a portal URL"),
    ("http://127.0.0.1:8000/gang way", "not a portal URL"),
    ("http://127.0.0.1:8000/gangw\u00e4y", "not a portal URL"),
], ids=["no scheme", "a file", "a password in it", "a port with a letter", "a port past 65535", "an unclosed [",
        "a space", "a path other than ASCII"])  # fmt: skip
def test_a_url_that_is_not_a_portals_is_a_usage_error(cli, fake_portal, url, said):
    # A mistake in the configuration: said at once, not retried for seconds and reported as a server down.
    result = cli("queue", env={"GANGWAY_URL": url})
    assert result.code == 2 and said in result.err and "hunter2" not in result.err
    assert "Traceback" not in result.err and result.waits == [] and not fake_portal.requests


def test_a_redirect_is_not_followed(cli, fake_portal, tmp_path):
    elsewhere = FakePortal().start()
    try:
        fake_portal.on("POST", "/api/v1/jobs/", Answer(301, b"", {"Location": f"{elsewhere.url}/api/v1/jobs/"}))
        (tmp_path / "job.yaml").write_text("name: x\n")
        result = cli("submit", str(tmp_path / "job.yaml"), env={"GANGWAY_TOKEN": SECRET})
    finally:
        elsewhere.close()
    assert result.code == 2
    assert f"redirects to {elsewhere.url}/api/v1/jobs/" in result.err and "set GANGWAY_URL" in result.err
    assert not elsewhere.requests  # neither the token nor the job went there
