"""Where the CLI connects and with which token: the portal URL's check and the token's sources.

Both answer with a sentence for the person at the terminal and never repeat the token: a CI log
keeps whatever a command prints.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse

TRUE = {"1", "true", "yes", "on"}


class Problem(Exception):
    """The command line or environment gives no usable URL or token; the message says what to do."""


def allow_http_from_env() -> bool:
    return os.environ.get("GANGWAY_ALLOW_HTTP", "").strip().lower() in TRUE


def checked_url(url: str | None, *, allow_http: bool) -> str:
    """`url` (stripped) when the token may be sent there; raises Problem otherwise.

    Plain http goes only to this machine (localhost, 127.0.0.0/8, ::1) unless `allow_http`: anywhere
    else the token would cross the network readable by anyone on the way.
    """
    if not url:
        raise Problem("no portal URL: pass --url or set GANGWAY_URL.")
    url = url.strip()
    parts = _split(url)
    if parts is not None and (parts.username is not None or parts.password is not None):
        raise Problem("the portal URL holds a user name or password; give the token with GANGWAY_TOKEN or "
                      "GANGWAY_TOKEN_FILE instead.")  # fmt: skip
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise Problem(f"not a portal URL: {url[:200]!r}; one reads like https://gangway.example.com or "
                      "https://gangway.example.com:8443.")  # fmt: skip
    if parts.scheme == "http" and not allow_http and not _this_machine(parts.hostname):
        raise Problem(f"refusing to send the token over plain http to {parts.hostname}: use https://, or pass "
                      "--allow-http (GANGWAY_ALLOW_HTTP=1) on a network you trust.")  # fmt: skip
    return url


def _split(url: str) -> urllib.parse.SplitResult | None:
    """The parts of `url`, or None when no request can be sent to it: an unclosed [, a port that is not
    a number from 1 to 65535, spaces or control characters, characters other than ASCII outside the host
    name (which goes in its IDNA form). A mistake in the configuration, not a server to retry."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    printable = all(char.isprintable() and not char.isspace() for char in url)
    return parts if port != 0 and printable and url.replace(parts.netloc, "", 1).isascii() else None


def _sendable(text: str) -> bool:
    """Whether `text` may go into a request line or header as it is: ASCII, no spaces or control characters."""
    return text.isascii() and all(char.isprintable() and not char.isspace() for char in text)


def _this_machine(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_from(flag: str | None, flag_file: str | None, *, env: str, env_file: str) -> str | None:
    """The token from the first source given: the flag, the flag's file, $env, then the file $env_file
    names; None when none is given. Surrounding whitespace (a file's last newline) is dropped; raises
    Problem for a file that cannot be read or a token with spaces or control characters inside, which
    no header may carry."""
    if flag and flag_file:
        raise Problem("give the token once: --token or --token-file, not both.")
    sources = [(lambda: flag, "--token"), (lambda: _read(flag_file, "--token-file"), "--token-file"),
               (lambda: os.environ.get(env), f"${env}"),
               (lambda: _read(os.environ.get(env_file), f"${env_file}"), f"${env_file}")]  # read in turn, as needed
    for source, where in sources:
        value = source()
        if value is not None and not value.strip() and where.endswith(("-file", "_FILE")):
            raise Problem(f"the token file named by {where} is empty.")
        if value is None or not value.strip():
            continue
        token = value.strip()
        if not _sendable(token):
            raise Problem(f"the token from {where} has spaces or control characters inside it, or characters "
                          "other than ASCII; check the secret.")  # fmt: skip
        return token
    return None


def _read(path: str | None, where: str) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return file.read(4096)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise Problem(f"cannot read the token file {path} ({where}): {reason}.") from None
