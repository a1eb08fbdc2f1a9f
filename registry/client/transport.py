"""The registry's REST API over one httpx connection pool, and the error it raises.

Every request counts the body bytes it sends (``client.bytes_sent``) and is
recorded in ``client.requests`` as ``(method, path)``, so a caller can tell
what a transfer cost. A client may be shared by threads (chunk transfers keep
several requests in flight): httpx's pool is thread-safe, and so are the counters.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from email.message import Message
from typing import Any
from urllib.parse import quote

import httpx

from registry.client.errors import ClientError as ClientError  # where callers import it
from registry.client.tally import Tally as Tally  # where callers import it
from registry.client.urls import check_registry_url, default_url

MISSING_BATCH = 10_000

Progress = Callable[[int], None]
"""Called with the number of bytes just transferred."""

PLAIN_UPLOAD_TYPE = "application/octet-stream"
"""A whole upload's ``Content-Type`` when its body is the file's bytes as they are."""


_SAFE_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.carton$")


def attachment_filename(response: httpx.Response) -> str | None:
    """The ``Content-Disposition`` file name, if it is a plain ``*.carton`` name (no path)."""
    header = response.headers.get("content-disposition")
    if not header:
        return None
    message = Message()
    message["content-disposition"] = header
    name = message.get_filename()
    return name if name and _SAFE_FILENAME.match(name) else None


def error_message(response: httpx.Response) -> str:
    """The ``{"error": ...}`` of a failed response, else the start of its text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    try:
        text = response.text.strip()
    except httpx.ResponseNotRead:
        text = ""
    return text[:500] or response.reason_phrase or "request failed"


def error_field(response: httpx.Response, key: str) -> object:
    """A field of a JSON error body, else None."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get(key) if isinstance(body, dict) else None


def listed_in_error(response: httpx.Response, key: str) -> list[str]:
    """A list of names in an error body (``missing`` files, ``missing_chunks``), else empty."""
    names = error_field(response, key)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


class TLSOnFirstUse(httpx.BaseTransport):
    """httpx's default transport, but with its TLS context (the CA bundle, parsed) built on
    the first ``https://`` request: against a plain-HTTP registry that is a fifth of a
    command's start, and a re-push does little else. Proxies from the environment are
    the client's own mounts and are not affected."""

    def __init__(self) -> None:
        self._plain = httpx.HTTPTransport(verify=False)  # only ever sees http:// URLs
        self._tls: httpx.HTTPTransport | None = None
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "https":
            return self._plain.handle_request(request)
        with self._lock:
            if self._tls is None:
                self._tls = httpx.HTTPTransport()
        return self._tls.handle_request(request)

    def close(self) -> None:
        self._plain.close()
        if self._tls is not None:
            self._tls.close()


class RegistryClient:
    """The registry's REST API over one httpx connection pool."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | None = 300.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = check_registry_url(url or default_url()).rstrip("/")
        self.token = token
        self.bytes_sent = 0
        self.requests: list[tuple[str, str]] = []
        self._counting = threading.Lock()
        headers = {"User-Agent": "carton-registry-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            follow_redirects=True,
            transport=transport if transport is not None else TLSOnFirstUse(),
            event_hooks={"request": [self._on_request]},
        )

    # -- plumbing ------------------------------------------------------------------
    def _on_request(self, request: httpx.Request) -> None:
        # Bodies given as bytes are counted here; streamed ones as they are read.
        size = len(request.content) if isinstance(request.stream, httpx.ByteStream) else 0
        with self._counting:
            self.requests.append((request.method, request.url.path))
            self.bytes_sent += size

    def _counted(
        self, chunks: Iterable[bytes], size: int, progress: Progress | None
    ) -> Iterator[bytes]:
        """The body's chunks, counted; ClientError when they end short of ``size`` (the
        Content-Length sent), rather than the connection's protocol error."""
        sent = 0
        for chunk in chunks:
            sent += len(chunk)
            with self._counting:
                self.bytes_sent += len(chunk)
            if progress is not None:
                progress(len(chunk))
            yield chunk
        if sent < size:
            raise ClientError(
                f"upload truncated: the data ended after {sent} of {size} bytes "
                "(did the file change while it was read?)"
            )

    def count(self, method: str, path_prefix: str = "", path_suffix: str = "") -> int:
        """How many requests with this method (and path prefix and suffix) were sent."""
        return sum(
            1
            for m, p in self.requests
            if m == method and p.startswith(path_prefix) and p.endswith(path_suffix)
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ClientError(f"cannot connect to the registry at {self.url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ClientError(f"{method} {self.url}{path} timed out: {exc}") from exc
        self.check(response)
        return response

    @staticmethod
    def check(response: httpx.Response) -> None:
        if response.status_code >= 400:
            if not response.is_stream_consumed:
                response.read()
            raise ClientError(
                error_message(response),
                response.status_code,
                listed_in_error(response, "missing"),
                listed_in_error(response, "missing_chunks"),
                error_field(response, "sha256_mismatch") is True,
            )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- API -----------------------------------------------------------------------
    def missing_blobs(self, hashes: Iterable[str]) -> list[str]:
        wanted = list(dict.fromkeys(hashes))
        missing: list[str] = []
        for start in range(0, len(wanted), MISSING_BATCH):
            batch = wanted[start : start + MISSING_BATCH]
            body = self.request("POST", "/api/v1/blobs/missing", json={"sha256": batch}).json()
            missing.extend(body["missing"])
        return missing

    def put_blob(
        self,
        sha256: str,
        chunks: Iterable[bytes],
        size: int | None,
        progress: Progress | None = None,
        content_type: str = PLAIN_UPLOAD_TYPE,
    ) -> dict[str, Any]:
        """Upload one file of ``size`` bytes on the wire (None: not known before it is
        sent, the body goes chunked); ``content_type``: the file's bytes as they are, or
        the records of a cut upload (``client.cut_upload``)."""
        headers = {"Content-Type": content_type}
        if size is not None:
            headers["Content-Length"] = str(size)
        return self.request(
            "PUT",
            f"/api/v1/blobs/{sha256}",
            content=self._counted(chunks, size or 0, progress),
            headers=headers,
        ).json()

    def put_blobs(
        self, chunks: Iterable[bytes], size: int, progress: Progress | None, content_type: str
    ) -> list[dict[str, Any]]:
        """Upload several files in one request (``client.cut_upload.files_body``) of
        ``size`` bytes; the registry's answer for each, in order."""
        return list(
            self.request(
                "POST",
                "/api/v1/blobs",
                content=self._counted(chunks, size, progress),
                headers={"Content-Type": content_type, "Content-Length": str(size)},
            ).json()["blobs"]
        )

    def chunking(self) -> dict[str, Any]:
        """How the registry cuts files into chunks (``GET /api/v1/chunking``)."""
        return self.request("GET", "/api/v1/chunking").json()

    def missing_chunks(self, names: list[str]) -> list[str]:
        """Which of ``names`` (at most the registry's ``max_query``) it does not hold."""
        body = self.request("POST", "/api/v1/chunks/missing", json={"chunks": names}).json()
        return list(body["missing"])

    def post_chunks(self, parts: Iterable[bytes], size: int) -> dict[str, Any]:
        """Upload chunk records (docs/chunk-transfer.md: digest, length, bytes), ``size``
        bytes in all, streamed as the parts come."""
        return self.request(
            "POST",
            "/api/v1/chunks",
            content=self._counted(parts, size, None),
            headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
        ).json()

    def assemble_blob(self, sha256: str, size: int, names: list[str]) -> dict[str, Any]:
        """Make blob ``sha256`` from stored chunks; a 400's ``missing_chunks`` says which lack."""
        return self.request(
            "POST",
            f"/api/v1/blobs/{sha256}/assemble",
            json={"size": size, "chunks": names},
            timeout=httpx.Timeout(None, connect=10.0),  # the registry reads every byte back
        ).json()

    def post_carton(
        self,
        chunks: Iterable[bytes],
        size: int,
        *,
        model: str | None = None,
        tag: str | None = None,
        namespace: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        named = (("model", model), ("tag", tag), ("namespace", namespace))
        params = {k: v for k, v in named if v is not None}
        return self.request(
            "POST",
            "/api/v1/cartons",
            params=params,
            content=self._counted(chunks, size, progress),
            headers={"Content-Length": str(size), "Content-Type": "application/zip"},
            timeout=httpx.Timeout(None, connect=10.0),  # the server verifies every byte
        ).json()

    def get_model(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/models/{quote(name, safe='')}").json()

    def get_carton(self, ref: str) -> dict[str, Any]:
        """Metadata of the carton a manifest hash, ``sha256:<hash>`` or unique prefix names."""
        return self.request("GET", f"/api/v1/cartons/{quote(ref, safe=':')}").json()

    def carton_filename(self, manifest_sha256: str, *, full: bool = False) -> str:
        """The file name the registry gives this carton's download (as a browser saves it)."""
        params = {"form": "full"} if full else None
        response = self.request("HEAD", f"/cartons/{manifest_sha256}.carton", params=params)
        return attachment_filename(response) or f"{manifest_sha256}.carton"

    def whoami(self) -> dict[str, Any]:
        """How the registry sees this client's token: ``{"auth": mode, "scopes": [...]}``."""
        return self.request("GET", "/api/v1/whoami").json()

    def put_tag(
        self, name: str, tag: str, manifest_sha256: str, *, if_match: str | None = None
    ) -> dict[str, Any]:
        headers = {"If-Match": f'"{if_match}"'} if if_match else None
        return self.request(
            "PUT",
            f"/api/v1/models/{quote(name, safe='')}/tags/{quote(tag, safe='')}",
            json={"manifest_sha256": manifest_sha256},
            headers=headers,
        ).json()

    def delete_tag(self, name: str, tag: str, *, if_match: str | None = None) -> None:
        headers = {"If-Match": f'"{if_match}"'} if if_match else None
        self.request(
            "DELETE",
            f"/api/v1/models/{quote(name, safe='')}/tags/{quote(tag, safe='')}",
            headers=headers,
        )

    def delete_version(self, name: str, version: int) -> dict[str, Any]:
        return self.request(
            "DELETE", f"/api/v1/models/{quote(name, safe='')}/versions/{version}"
        ).json()

    def delete_model(self, name: str) -> dict[str, Any]:
        """``DELETE /api/v1/models/{name}``: every version of the model, at once."""
        return self.request("DELETE", f"/api/v1/models/{quote(name, safe='')}").json()

    def list_models(
        self, q: str | None = None, limit: int = 200, namespace: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every model matching ``q`` (in ``namespace``), following the pagination cursor."""
        cursor: str | None = None
        while True:
            given = {"limit": limit, "q": q or None, "namespace": namespace, "cursor": cursor}
            params = {k: v for k, v in given.items() if v is not None}
            page = self.request("GET", "/api/v1/models", params=params).json()
            yield from page["models"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def stream_carton(self, manifest_sha256: str, *, full: bool = False) -> httpx.Response:
        """An open streaming response for ``/cartons/{sha}.carton``; close it when done."""
        params = {"form": "full"} if full else None
        request = self.http.build_request(
            "GET", f"/cartons/{manifest_sha256}.carton", params=params
        )
        try:
            response = self.http.send(request, stream=True)
        except httpx.ConnectError as exc:
            raise ClientError(f"cannot connect to the registry at {self.url}: {exc}") from exc
        try:
            self.check(response)
        except BaseException:
            response.close()
            raise
        return response
