"""TLSOnFirstUse: no TLS context for a plain-HTTP registry; full verification for https."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from registry.client.transport import TLSOnFirstUse


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: object) -> None:
        pass


def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def serve(tls: tuple[Path, Path] | None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def plain_url() -> Iterator[str]:
    yield from serve(None)


@pytest.fixture
def tls_url(tmp_path: Path) -> Iterator[str]:
    yield from serve(self_signed(tmp_path))


def test_a_plain_http_registry_never_builds_a_tls_context(plain_url):
    transport = TLSOnFirstUse()
    with httpx.Client(transport=transport) as client:
        assert client.get(plain_url).content == b"hello"
    assert transport._tls is None


def test_https_is_verified_as_httpx_would(tls_url):
    transport = TLSOnFirstUse()
    with (
        httpx.Client(transport=transport) as client,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(tls_url)
    assert transport._tls is not None
