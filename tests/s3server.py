"""An S3 server for tests: MinIO if ``REGISTRY_TEST_S3_ENDPOINT`` is set, else moto.

``start_s3_server()`` returns an ``S3Server`` with ``endpoint_url``,
``make_bucket()``, ``client()``, ``env()`` (variables for a registry
subprocess) and, for the in-process moto server, ``stop()`` / ``start()``
which really drop the listening socket *and* open connections and come back on
the same port with the same data (moto keeps its state in-process), so a test
can take S3 away mid-push.

Fixtures built on it live in ``tests/s3fixtures.py``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from typing import Any

DEFAULT_REGION = "us-east-1"


def _no_proxy_for_localhost() -> None:
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        hosts = [h for h in current.split(",") if h]
        for host in ("127.0.0.1", "localhost"):
            if host not in hosts:
                hosts.append(host)
        os.environ[name] = ",".join(hosts)


class S3Server:
    """A running S3-compatible server (see the module docstring)."""

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        access_key: str = "testing",
        secret_key: str = "testing",
        region: str = DEFAULT_REGION,
        port: int = 0,
    ) -> None:
        self.external = endpoint_url is not None
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self._endpoint_url = endpoint_url
        self._port = port
        self._httpd: Any = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._clients: list[Any] = []

    # -- lifecycle -------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._endpoint_url is None:
            raise RuntimeError("the S3 server was never started")
        return self._endpoint_url

    @property
    def port(self) -> int:
        return self._port

    @property
    def can_restart(self) -> bool:
        return not self.external

    @property
    def running(self) -> bool:
        return self.external or self._httpd is not None

    def start(self) -> S3Server:
        """Start (or restart, on the same port) the in-process moto server."""
        if self.external or self._httpd is not None:
            return self
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        server = self

        class TrackingHandler(MotoRequestHandler):  # type: ignore[misc, valid-type]
            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._connections.add(self.connection)

            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass  # one line per request drowns test output

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with server._lock:
                        server._connections.discard(self.connection)

        app = DomainDispatcherApplication(create_backend_app)
        httpd = make_server(
            "127.0.0.1", self._port, app, threaded=True, request_handler=TrackingHandler
        )
        httpd.daemon_threads = True
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._endpoint_url = f"http://127.0.0.1:{self._port}"
        self._thread = threading.Thread(
            target=httpd.serve_forever, name=f"moto-s3-{self._port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: close the listening socket and every open connection."""
        if self.external:
            raise RuntimeError("cannot stop an external S3 server (REGISTRY_TEST_S3_ENDPOINT)")
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
            self._connections.clear()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def restart(self) -> S3Server:
        self.stop()
        return self.start()

    def close(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()
        if not self.external:
            self.stop()

    # -- helpers ---------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """Environment for boto3 / a registry process talking to this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "REGISTRY_S3_ENDPOINT_URL": self.endpoint_url,
        }

    def client(self):
        """A boto3 S3 client for this server (closed with the server)."""
        from registry.blobstore.s3client import make_client

        client = make_client(self.endpoint_url, self.region)
        self._clients.append(client)
        return client

    def make_bucket(self, name: str | None = None) -> str:
        """Create a fresh bucket (unique name unless given) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:20]}"
        client = self._admin_client()
        kwargs: dict[str, Any] = {"Bucket": name}
        if self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        client.create_bucket(**kwargs)
        return name

    def delete_bucket(self, name: str) -> None:
        """Empty and delete a bucket (best effort)."""
        client = self._admin_client()
        try:
            for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=name):
                for up in page.get("Uploads", []):
                    client.abort_multipart_upload(
                        Bucket=name, Key=up["Key"], UploadId=up["UploadId"]
                    )
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if objects:
                    client.delete_objects(Bucket=name, Delete={"Objects": objects})
            client.delete_bucket(Bucket=name)
        except Exception:
            pass

    _admin: Any = None

    def _admin_client(self):
        if self._admin is None:
            self._admin = self.client()
        return self._admin

    def store(self, bucket: str, prefix: str = "", **kwargs: Any):
        """An S3BlobStore on ``bucket`` of this server."""
        from registry.blobstore.s3 import S3BlobStore

        return S3BlobStore(bucket, prefix, endpoint_url=self.endpoint_url, **kwargs)

    def __repr__(self) -> str:
        kind = "external" if self.external else "moto"
        return f"S3Server({kind}, {self._endpoint_url})"


def start_s3_server() -> S3Server:
    """Start (or connect to) the test S3 server; sets AWS_* variables for boto3.

    ``REGISTRY_TEST_S3_ENDPOINT`` (with ``REGISTRY_TEST_S3_ACCESS_KEY`` /
    ``REGISTRY_TEST_S3_SECRET_KEY``, default ``minioadmin``) selects an external
    server such as MinIO; otherwise an in-process moto server on a free port.
    Raises if the server cannot be started or reached.
    """
    _no_proxy_for_localhost()
    endpoint = os.environ.get("REGISTRY_TEST_S3_ENDPOINT") or None
    region = os.environ.get("REGISTRY_TEST_S3_REGION") or DEFAULT_REGION
    if endpoint:
        server = S3Server(
            endpoint_url=endpoint.rstrip("/"),
            access_key=os.environ.get("REGISTRY_TEST_S3_ACCESS_KEY") or "minioadmin",
            secret_key=os.environ.get("REGISTRY_TEST_S3_SECRET_KEY") or "minioadmin",
            region=region,
        )
    else:
        server = S3Server(region=region).start()
    os.environ["AWS_ACCESS_KEY_ID"] = server.access_key
    os.environ["AWS_SECRET_ACCESS_KEY"] = server.secret_key
    os.environ["AWS_DEFAULT_REGION"] = server.region
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    try:
        server._admin_client().list_buckets()
    except Exception:
        server.close()
        raise
    return server
