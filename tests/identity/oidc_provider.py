"""A small OpenID Connect provider for the tests: a real HTTP server issuing RS256-signed tokens.

It implements the authorization-code flow as an identity provider does:
/authorize redirects back with a code (the "user" is chosen by the test with
`provider.next_user`), /token exchanges the code for a signed ID token and an
access token (checking the client's secret and the redirect URI), /userinfo
answers the claims for the access token, /jwks serves the public key.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

CLIENT_ID, CLIENT_SECRET = "gangway", "s3cret-client"


class Provider:
    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.next_user: dict = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Provider:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def settings(self) -> dict:
        """The Django settings that point Gangway at this provider."""
        return {
            "OIDC_RP_CLIENT_ID": CLIENT_ID, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET, "OIDC_RP_SIGN_ALGO": "RS256",
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.url}/authorize", "OIDC_OP_TOKEN_ENDPOINT": f"{self.url}/token",
            "OIDC_OP_USER_ENDPOINT": f"{self.url}/userinfo", "OIDC_OP_JWKS_ENDPOINT": f"{self.url}/jwks",
            "OIDC_RP_SCOPES": "openid email profile groups", "OIDC_VERIFY_SSL": False,
        }  # fmt: skip

    def id_token(self, claims: dict, nonce: str | None) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "aud": CLIENT_ID, "iat": now, "exp": now + 300, **claims}
        if nonce:
            payload["nonce"] = nonce
        return jwt.encode(payload, self.key, algorithm="RS256", headers={"kid": self.kid})

    def jwks(self) -> dict:
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/authorize":
                    if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
                        return self._json(400, {"error": "invalid_request"})
                    code = secrets.token_urlsafe(16)
                    provider.codes[code] = {"user": dict(provider.next_user), "nonce": query.get("nonce"),
                                            "redirect_uri": query["redirect_uri"]}  # fmt: skip
                    self.send_response(302)
                    self.send_header("Location", f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}")
                    self.end_headers()
                elif url.path == "/jwks":
                    self._json(200, provider.jwks())
                elif url.path == "/userinfo":
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    claims = provider.tokens.get(token)
                    self._json(200, claims) if claims else self._json(401, {"error": "invalid_token"})
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                if urlparse(self.path).path != "/token":
                    return self._json(404, {"error": "not_found"})
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
                grant = provider.codes.pop(form.get("code", ""), None)
                if form.get("client_secret") != CLIENT_SECRET or grant is None:
                    return self._json(400, {"error": "invalid_grant"})
                if form.get("redirect_uri") != grant["redirect_uri"]:
                    return self._json(400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
                access = secrets.token_urlsafe(16)
                provider.tokens[access] = grant["user"]
                self._json(200, {"access_token": access, "token_type": "Bearer", "expires_in": 300,
                                 "id_token": provider.id_token({"sub": grant["user"]["sub"]}, grant["nonce"])})  # fmt: skip

        return Handler
