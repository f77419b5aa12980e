"""Identity providers for the sign-in tests, on loopback.

- `NodeProvider`: a real OpenID Connect provider, node's `oidc-provider` run by
  `provider.js` (installed by `make oidc-provider`, which the fixture runs when npm is there
  and the package is not yet); people and their groups come from a JSON file the test
  writes and may rewrite between two sign-ins.
- `TokenDesk`: a provider whose id token the test writes claim by claim (a wrong audience,
  another issuer, an expired token), for what no well-behaved provider would send.
- `through_provider`: what a browser does between the site's redirect to the provider and
  the provider's redirect back (its sign-in form filled in), over HTTP.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import ROOT, free_port, skip_for_missing, wait_for_port

HERE = Path(__file__).resolve().parent
MODULES = ROOT / ".cache/npm/oidc-provider/node_modules"
CLIENT_ID, CLIENT_SECRET = "agentsite", "a-client-secret-for-tests"
ADA_PASSWORD = "ada-at-the-provider"
# Ada's account at the provider.
ADA: dict[str, Any] = {
    "password": ADA_PASSWORD,
    "sub": "0f6c2a1e-ada",
    "email": "ada@example.org",
    "name": "Ada Lovelace",
    "given_name": "Ada",
    "family_name": "Lovelace",
    "groups": ["support"],
}


def ensure_installed() -> None:
    """The provider's package, installed by `make oidc-provider` when it is not yet; the
    test skips (or, where everything is required, fails) when npm is missing."""
    if (MODULES / "oidc-provider/package.json").exists():
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        skip_for_missing(
            "npm is missing: the OpenID Connect provider the test signs in at "
            "comes from npm (`make oidc-provider`; Debian: apt-get install npm)"
        )
    done = subprocess.run(
        ["make", "--no-print-directory", "oidc-provider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"make oidc-provider failed:\n{done.stdout}\n{done.stderr}"


class NodeProvider:
    """`provider.js` in a subprocess; `accounts` is what its JSON file says."""

    def __init__(
        self, folder: Path, redirect_uri: str, accounts: dict[str, Any], port: int = 0
    ) -> None:
        self.port = port or free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.redirect_uri = redirect_uri
        self.file = folder / "accounts.json"
        self.log = folder / "provider.log"
        self.accounts = accounts
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def accounts(self) -> dict[str, Any]:
        return dict(json.loads(self.file.read_text()))

    @accounts.setter
    def accounts(self, accounts: dict[str, Any]) -> None:
        self.file.write_text(json.dumps(accounts))

    def set_groups(self, username: str, groups: list[str]) -> None:
        accounts = self.accounts
        accounts[username]["groups"] = groups
        self.accounts = accounts

    def start(self) -> NodeProvider:
        command = [
            shutil.which("node") or "node",
            str(HERE / "provider.js"),
            str(self.port),
            self.redirect_uri,
            str(self.file),
            CLIENT_ID,
            CLIENT_SECRET,
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                env={"PATH": "/usr/bin:/bin", "OIDC_PROVIDER_MODULES": str(MODULES)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(self.port, self.process, timeout=30)
        except AssertionError:
            raise AssertionError(self.log.read_text()) from None
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


def node_provider(tmp_path: Path, redirect_uri: str) -> Iterator[NodeProvider]:
    """A provider where Ada has an account, for a fixture of a test module to yield from."""
    ensure_installed()
    folder = tmp_path / "provider"
    folder.mkdir()
    provider = NodeProvider(folder, redirect_uri, {"ada": dict(ADA)}).start()
    try:
        yield provider
    finally:
        provider.stop()


def through_provider(
    start: str, username: str, password: str, *, back_to: str, browser: httpx.Client
) -> str:
    """From the provider's authorization URL `start` to the address it sends the browser
    back to (one under `back_to`), signing in on its form on the way when it asks."""
    url = start
    for _ in range(12):
        if url.startswith(back_to):
            return url
        response = browser.get(url)
        if response.status_code == 200 and 'name="password"' in response.text:
            response = browser.post(
                url, data={"username": username, "password": password, "action": "login"}
            )
            assert "Wrong username or password" not in response.text, "refused at the provider"
        assert response.is_redirect, f"{response.status_code} at {url}: {response.text[:500]}"
        url = urljoin(url, response.headers["location"])
    raise AssertionError(f"the provider never sent the browser back to {back_to}")


def cancel_at_provider(start: str, *, back_to: str, browser: httpx.Client) -> str:
    """Like `through_provider`, with the provider's Cancel button pressed."""
    url = start
    for _ in range(12):
        if url.startswith(back_to):
            return url
        response = browser.get(url)
        if response.status_code == 200 and 'name="password"' in response.text:
            response = browser.post(url, data={"action": "cancel"})
        assert response.is_redirect, f"{response.status_code} at {url}: {response.text[:500]}"
        url = urljoin(url, response.headers["location"])
    raise AssertionError(f"the provider never sent the browser back to {back_to}")


# ---- a provider whose tokens the test writes ------------------------------------------------


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class TokenDesk:
    """Discovery, keys, a token endpoint and (unless `userinfo` is None) a userinfo
    endpoint; the id token is `claims` as the test set them, signed with its RS256 key."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.signing_key = self.key  # another: a token the published key does not verify
        self.claims: dict[str, Any] = {}
        self.userinfo: dict[str, Any] | None = None
        self.token_status = 200
        self.discovery_requests = 0
        self.token_requests: list[dict[str, list[str]]] = []
        # What discovery says of the client's authentication at the token endpoint (None:
        # nothing), and the Authorization header of each token request.
        self.auth_methods: list[str] | None = None
        self.token_authorizations: list[str | None] = []
        desk = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def send_json(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = urlparse(self.path).path
                if path == "/.well-known/openid-configuration":
                    desk.discovery_requests += 1
                    self.send_json(desk.document())
                elif path == "/jwks":
                    self.send_json({"keys": [desk.public_jwk()]})
                elif path == "/userinfo" and desk.userinfo is not None:
                    self.send_json(desk.userinfo)
                else:
                    self.send_json({"error": "not_found"}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                desk.token_requests.append(parse_qs(self.rfile.read(length).decode()))
                desk.token_authorizations.append(self.headers.get("Authorization"))
                if desk.token_status != 200:
                    self.send_json({"error": "invalid_grant"}, desk.token_status)
                    return
                id_token = jwt.encode(
                    desk.claims, desk.signing_key, algorithm="RS256", headers={"kid": "desk"}
                )
                self.send_json(
                    {
                        "access_token": "an-access-token",
                        "token_type": "Bearer",
                        "id_token": id_token,
                        "expires_in": 300,
                    }
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def document(self) -> dict[str, Any]:
        found = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "id_token_signing_alg_values_supported": ["RS256"],
        }
        if self.userinfo is not None:
            found["userinfo_endpoint"] = f"{self.issuer}/userinfo"
        if self.auth_methods is not None:
            found["token_endpoint_auth_methods_supported"] = self.auth_methods
        return found

    def public_jwk(self) -> dict[str, str]:
        numbers = self.key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": "desk",
            "alg": "RS256",
            "use": "sig",
            "n": _b64(numbers.n),
            "e": _b64(numbers.e),
        }

    def token(self, nonce: str, /, **claims: Any) -> None:
        """The next id token: a good one for `nonce`, with `claims` over it (None: left
        out)."""
        now = int(time.time())
        self.claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": "desk-subject",
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "preferred_username": "grace",
            "email": "grace@example.org",
        }
        self.claims.update(claims)
        for name, value in claims.items():
            if value is None:
                del self.claims[name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def token_desk() -> Iterator[TokenDesk]:
    desk = TokenDesk()
    try:
        yield desk
    finally:
        desk.close()


def authorization_params(location: str) -> dict[str, str]:
    """The parameters of the site's redirect to a provider."""
    return {key: values[0] for key, values in parse_qs(urlparse(location).query).items()}
