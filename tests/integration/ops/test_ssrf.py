"""LINKS fetching refuses internal addresses: before connecting, after DNS, on every redirect.

No test here ever sends a packet to 10.0.0.0/8 or 169.254.0.0/16: the refusals
are asserted with transports that fail the test if they are reached.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from registry.services import linkfetch
from registry.services.linkfetch import LinkPolicy, LinkRefused, is_public, iter_link, make_client
from tests.integration.ops.helpers import make_carton, push, sha

ANY = LinkPolicy(("*",), timeout=5)
INTERNAL = [
    "http://127.0.0.1/x",
    "http://127.0.0.1:8080/blobs/abc",
    "http://10.0.0.1/x",
    "http://10.255.255.254:9000/bucket/key",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://localhost/x",
    "http://localhost:8080/x",
    "http://[::1]/x",
    "http://[::ffff:10.0.0.1]/x",
    "http://[::ffff:169.254.169.254]/x",
    "http://[64:ff9b::a9fe:a9fe]/x",  # NAT64 of 169.254.169.254
    "http://[2002:a00:1::]/x",  # 6to4 of 10.0.0.1
    "http://[fe80::1]/x",
    "http://0.0.0.0/x",
    "http://192.168.1.1/x",
    "http://172.16.0.1/x",
    "http://100.64.0.1/x",
    "http://224.0.0.1/x",
    "http://240.0.0.1/x",
    "http://2130706433/x",  # 127.0.0.1 as one decimal number, resolved by getaddrinfo
]


def forbidden_transport() -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        pytest.fail(f"a request reached the network: {request.url}")

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("url", INTERNAL)
def test_wildcard_refuses_internal_addresses_before_connecting(url):
    with pytest.raises(LinkRefused, match=r"non-public|resolve"):
        ANY.check(url)
    client = httpx.Client(transport=forbidden_transport())
    with pytest.raises(LinkRefused):
        b"".join(iter_link(client, url, ANY, 1 << 20))


def test_allow_list_is_exact_and_names_are_trusted():
    policy = LinkPolicy(("127.0.0.1:8765", "files.example"))
    assert policy.check("http://127.0.0.1:8765/x") is None  # listed: trusted, not pinned
    assert policy.check("https://files.example/x") is None
    for url in ("http://127.0.0.1:8766/x", "http://localhost:8765/x", "http://10.0.0.1/x"):
        with pytest.raises(LinkRefused, match="REGISTRY_LINK_FETCH_ALLOW"):
            policy.check(url)
    with pytest.raises(LinkRefused, match="scheme"):
        ANY.check("file:///etc/passwd")
    with pytest.raises(LinkRefused, match="scheme"):
        ANY.check("gopher://example.org/")


def test_public_addresses_pass_and_are_returned_for_pinning(monkeypatch):
    def fake_getaddrinfo(host, port, *args, **kwargs):
        assert host == "cdn.example"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    monkeypatch.setattr(linkfetch.socket, "getaddrinfo", fake_getaddrinfo)
    assert ANY.check("https://cdn.example/blob") == [ipaddress.ip_address("93.184.216.34")]
    assert is_public(ipaddress.ip_address("2606:4700::1111"))
    assert not is_public(ipaddress.ip_address("::ffff:127.0.0.1"))


def test_name_resolving_to_a_mix_is_refused(monkeypatch):
    """Every resolved address must be public (a rebinding host often answers with both)."""

    def fake_getaddrinfo(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port)),
        ]

    monkeypatch.setattr(linkfetch.socket, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(LinkRefused, match=r"169\.254\.169\.254"):
        ANY.check("http://rebind.example/x")


def test_redirect_to_internal_address_refused_mock():
    """An allowed host redirecting to the metadata service: the second hop is never sent."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.host == "files.example":
            return httpx.Response(
                302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}
            )
        pytest.fail(f"followed a redirect to {request.url}")

    policy = LinkPolicy(("files.example", "*"))
    client = httpx.Client(transport=httpx.MockTransport(handler), follow_redirects=False)
    with pytest.raises(LinkRefused, match=r"169\.254\.169\.254"):
        b"".join(iter_link(client, "http://files.example/blob", policy, 1 << 20))
    assert seen == ["http://files.example/blob"]


class _Server:
    def __init__(self, handler_cls) -> None:  # type: ignore[no-untyped-def]
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
        self.port = self.httpd.server_address[1]
        self.hits: list[str] = []
        self.httpd.hits = self.hits  # type: ignore[attr-defined]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(body: bytes = b"", location: str | None = None):  # type: ignore[no-untyped-def]
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.server.hits.append(self.path)  # type: ignore[attr-defined]
            if location:
                self.send_response(302)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
            pass

    return Handler


@pytest.fixture
def servers():
    target = _Server(_handler(b"secret internal data"))
    redirector = _Server(_handler(location=f"http://127.0.0.1:{target.port}/internal"))
    yield redirector, target
    redirector.close()
    target.close()


@pytest.mark.parametrize("wildcard", [False, True])
def test_redirect_to_unlisted_port_refused_real_server(servers, wildcard):
    redirector, target = servers
    allow = (f"127.0.0.1:{redirector.port}",) + (("*",) if wildcard else ())
    policy = LinkPolicy(allow, timeout=5)
    with make_client(policy) as client, pytest.raises(LinkRefused):
        b"".join(iter_link(client, f"http://127.0.0.1:{redirector.port}/blob", policy, 1 << 20))
    assert redirector.hits == ["/blob"]
    assert target.hits == []


def test_connections_are_pinned_to_checked_addresses(servers):
    """The client connects a host to the address its check approved, never via fresh DNS."""
    _, target = servers
    policy = LinkPolicy(("*",), timeout=5)
    with make_client(policy) as client:
        # A name nobody can resolve: only the pin can make this connection work.
        client.link_pins.pin(  # type: ignore[attr-defined]
            f"http://pinned.invalid:{target.port}/", [ipaddress.ip_address("127.0.0.1")]
        )
        r = client.get(f"http://pinned.invalid:{target.port}/data")
        assert r.status_code == 200 and r.content == b"secret internal data"
        assert r.request.headers["host"] == f"pinned.invalid:{target.port}"
        # A host that was never checked is never connected, whatever DNS says.
        with pytest.raises(httpx.ConnectError, match="unchecked host"):
            client.get(f"http://127.0.0.1:{target.port}/data")
    assert target.hits == ["/data"]


@pytest.mark.settings(link_fetch_allow=("*",))
def test_push_with_links_to_internal_addresses_refused(ops_client, registry_ctx, servers):
    _, target = servers
    digest = sha(b"secret internal data")
    urls = [
        f"http://127.0.0.1:{target.port}/internal",
        "http://10.0.0.1/blob",
        "http://169.254.169.254/latest/meta-data/",
        f"http://localhost:{target.port}/internal",
    ]
    data = make_carton({"w/small": b"inline"}, linked={"w/linked.bin": (digest, urls)})
    r = push(ops_client, data)
    assert r.status_code == 422, r.text
    message = r.json()["error"]
    for url in urls:
        assert url in message
    assert "non-public" in message
    assert target.hits == []
    assert not registry_ctx.blobs.exists(digest)
