"""A portal whose certificate does not verify (self-signed, or signed by an organisation's own CA) is a
configuration error, exit 2, saying what to set: another attempt, or a CI step run again, fails the same way."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gangway_cli.main import build_parser
from tests.cli.test_cli_errors import one_error_line


@pytest.fixture
def tls_portal(tmp_path):
    """An https portal on 127.0.0.1 with a self-signed certificate for 127.0.0.1; yields its URL and the
    certificate's file. It answers every GET with an empty queue."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"count": 0, "next": None, "previous": None, "results": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", cert
    server.shutdown()
    server.server_close()


def test_a_certificate_from_an_unknown_issuer_exits_2_naming_ssl_cert_file(cli, tls_portal, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    url, _ = tls_portal
    result = cli("queue", env={"GANGWAY_URL": url})
    assert result.code == 2, result.err
    line = one_error_line(result.err)
    assert f"The certificate of {url}/ does not verify (self-signed certificate): set SSL_CERT_FILE" in line
    assert result.waits == []  # not tried again


def test_the_portals_ca_is_trusted_through_ssl_cert_file(cli, tls_portal):
    url, cert = tls_portal
    result = cli("queue", env={"GANGWAY_URL": url, "SSL_CERT_FILE": str(cert)})
    assert result.code == 0, result.err
    assert result.out == "No waiting jobs.\n"


def test_a_certificate_for_another_name_exits_2_naming_gangway_url(cli, tls_portal):
    url, cert = tls_portal
    other = url.replace("127.0.0.1", "localhost")
    result = cli("queue", env={"GANGWAY_URL": other, "SSL_CERT_FILE": str(cert)})
    assert result.code == 2, result.err
    assert f"The certificate of {other}/ is not for localhost" in one_error_line(result.err)
    assert "set GANGWAY_URL to a name the certificate was issued for" in result.err


@pytest.mark.parametrize("args", [["--help"], ["queue", "--help"]])
def test_the_help_says_how_to_trust_the_portals_ca(capsys, args):
    with pytest.raises(SystemExit):
        build_parser().parse_args(args)
    assert "SSL_CERT_FILE" in capsys.readouterr().out
