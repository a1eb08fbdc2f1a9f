"""An httpx client for the registry's REST API, and the transfer verbs built on it.

The CLI (``registry.cli``) is a thin layer over this module; benchmarks and
scripts can use it directly::

    with RegistryClient("http://127.0.0.1:8080") as client:
        outcome = push_carton(client, "model.carton", tag="latest")
        pull_carton(client, outcome.manifest_sha256, "copy.carton", full=True)

Every request counts the body bytes it sends (``client.bytes_sent``) and is
recorded in ``client.requests`` as ``(method, path)``; the most recently
created client is ``registry.client.last_client`` so tests driving the CLI
in-process can read those counters.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit

import httpx

from registry.carton.errors import CartonFormatError
from registry.carton.manifest import LINKS_NAME, MANIFEST_NAME, is_sha256
from registry.carton.zipread import ArchiveLimits, CartonArchive
from registry.carton.zipwrite import STORED, ZSTD, write_zip
from registry.settings import DEFAULT_PORT

CHUNK = 1 << 20
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
MISSING_BATCH = 10_000
CARTON_TOML = "carton.toml"
TENSOR_INDEX = "tensor_data/index.toml"
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# A client-side reader accepts what the server could: limits as wide as its maxima.
CLIENT_LIMITS = ArchiveLimits(max_members=1_000_000, max_unpacked_bytes=1 << 62)

Progress = Callable[[int], None]
"""Called with the number of bytes just transferred."""

last_client: RegistryClient | None = None


class ClientError(Exception):
    """Something the user must be told about; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})" if self.status else self.message


def default_url() -> str:
    return os.environ.get("REGISTRY_URL") or DEFAULT_URL


def _error_message(response: httpx.Response) -> str:
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
        global last_client
        self.url = (url or default_url()).rstrip("/")
        self.token = token
        self.bytes_sent = 0
        self.requests: list[tuple[str, str]] = []
        headers = {"User-Agent": "carton-registry-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            follow_redirects=True,
            transport=transport,
            event_hooks={"request": [self._on_request]},
        )
        last_client = self

    # -- plumbing ------------------------------------------------------------------
    def _on_request(self, request: httpx.Request) -> None:
        self.requests.append((request.method, request.url.path))
        # Bodies given as bytes are counted here; streamed ones as they are read.
        stream = request.stream
        if isinstance(stream, httpx.ByteStream):
            self.bytes_sent += len(request.content)

    def _counted(self, chunks: Iterable[bytes], progress: Progress | None) -> Iterator[bytes]:
        for chunk in chunks:
            self.bytes_sent += len(chunk)
            if progress is not None:
                progress(len(chunk))
            yield chunk

    def count(self, method: str, path_prefix: str = "") -> int:
        """How many requests with this method (and path prefix) were sent."""
        return sum(1 for m, p in self.requests if m == method and p.startswith(path_prefix))

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
            raise ClientError(_error_message(response), response.status_code)

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
        self, sha256: str, chunks: Iterable[bytes], size: int, progress: Progress | None = None
    ) -> dict[str, Any]:
        return self.request(
            "PUT",
            f"/api/v1/blobs/{sha256}",
            content=self._counted(chunks, progress),
            headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
        ).json()

    def post_carton(
        self,
        chunks: Iterable[bytes],
        size: int,
        *,
        model: str | None = None,
        tag: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        params = {k: v for k, v in (("model", model), ("tag", tag)) if v is not None}
        return self.request(
            "POST",
            "/api/v1/cartons",
            params=params,
            content=self._counted(chunks, progress),
            headers={"Content-Length": str(size), "Content-Type": "application/zip"},
            timeout=httpx.Timeout(None, connect=10.0),  # the server verifies every byte
        ).json()

    def get_model(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/models/{quote(name, safe='')}").json()

    def get_carton(self, manifest_sha256: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/cartons/{manifest_sha256}").json()

    def list_models(self, q: str | None = None, limit: int = 200) -> Iterator[dict[str, Any]]:
        """Every model matching ``q``, following the pagination cursor."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": limit}
            if q:
                params["q"] = q
            if cursor:
                params["cursor"] = cursor
            page = self.request("GET", "/api/v1/models", params=params).json()
            yield from page["models"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def resolve(self, ref: str) -> tuple[str, str | None]:
        """(manifest hash, model name or None) of a reference (see ``parse_ref``)."""
        name, version, tag = parse_ref(ref)
        if name is None:
            return ref, None
        model = self.get_model(name)
        if tag is not None:
            entry = model.get("tags", {}).get(tag)
            if entry is None:
                raise ClientError(f"model {name!r} has no tag {tag!r}", 404)
            return entry["manifest_sha256"], name
        versions = model.get("versions", [])
        if version is not None:
            for v in versions:
                if v["version"] == version:
                    return v["manifest_sha256"], name
            raise ClientError(f"model {name!r} has no version {version}", 404)
        latest = model.get("tags", {}).get("latest")
        if latest is not None:
            return latest["manifest_sha256"], name
        if not versions:
            raise ClientError(f"model {name!r} has no versions", 404)
        best = max(versions, key=lambda v: v["version"])
        return best["manifest_sha256"], name

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


def parse_ref(ref: str) -> tuple[str | None, int | None, str | None]:
    """``(name, version, tag)``; name is None for a manifest hash.

    ``name@tag`` when the part after the last ``@`` is a valid tag,
    ``name:N`` when the part after the last ``:`` is an integer, else ``name``.
    """
    if is_sha256(ref):
        return None, None, None
    name, at, tag = ref.rpartition("@")
    if at and name and _TAG.match(tag):
        return name, None, tag
    name, colon, version = ref.rpartition(":")
    if colon and name and version.isdigit():
        return name, int(version), None
    if not ref:
        raise ClientError("empty reference")
    return ref, None, None


# -- push ---------------------------------------------------------------------------


@dataclass
class PushOutcome:
    manifest_sha256: str
    response: dict[str, Any]
    uploaded_blobs: int = 0
    uploaded_bytes: int = 0
    already_stored: int = 0
    linked: list[str] = field(default_factory=list)  # missing and not in the zip: left to LINKS
    full: bool = False
    local_error: str | None = None  # why the slim path was not taken


@dataclass
class PushPlan:
    """What a push will upload: blobs (sha256, path in zip, size)."""

    manifest_sha256: str
    distinct: int
    uploads: list[tuple[str, str, int]]
    linked: list[str]

    @property
    def upload_bytes(self) -> int:
        return sum(size for _, _, size in self.uploads)


def plan_push(client: RegistryClient, archive: CartonArchive) -> PushPlan:
    by_sha: dict[str, list[str]] = {}
    for entry in archive.manifest:
        by_sha.setdefault(entry.sha256, []).append(entry.path)
    missing = client.missing_blobs(by_sha)
    uploads: list[tuple[str, str, int]] = []
    linked: list[str] = []
    for sha in missing:
        present = [p for p in by_sha.get(sha, []) if p in archive.members]
        if present:
            uploads.append((sha, present[0], archive.member_size(present[0])))
        else:
            linked.append(sha)
    return PushPlan(archive.manifest_sha256, len(by_sha), uploads, linked)


def slim_zip(archive: CartonArchive) -> bytes:
    """carton.toml, tensor_data/index.toml, MANIFEST (and LINKS) of a carton, as a zip."""
    members: list[tuple[str, Callable[[], BinaryIO], int]] = []
    for path in (CARTON_TOML, TENSOR_INDEX):
        if path in archive.manifest and path in archive.members:
            members.append((path, lambda p=path: archive.open_member(p), STORED))  # type: ignore[misc]
    raw = archive.manifest.raw
    members.append((MANIFEST_NAME, lambda: io.BytesIO(raw), STORED))
    if LINKS_NAME in archive.members:
        members.append((LINKS_NAME, lambda: archive.open_member(LINKS_NAME), STORED))
    out = io.BytesIO()
    write_zip(out, members)
    return out.getvalue()


def push_carton(
    client: RegistryClient,
    path: str | os.PathLike[str],
    *,
    model: str | None = None,
    tag: str | None = None,
    full: bool = False,
    on_plan: Callable[[PushPlan], None] | None = None,
    on_local_error: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> PushOutcome:
    """Push a local carton, sending only the blobs the registry lacks (unless ``full``).

    A file that cannot be read locally as a carton is sent whole, so the
    registry's own validation gives the verdict.
    """
    path = Path(path)
    size = path.stat().st_size
    archive: CartonArchive | None = None
    local_error: str | None = None
    if not full:
        try:
            archive = CartonArchive.open(path, CLIENT_LIMITS)
        except CartonFormatError as exc:
            local_error = exc.message
            if on_local_error is not None:
                on_local_error(local_error)
    if archive is None:
        with path.open("rb") as f:
            response = client.post_carton(
                iter(lambda: f.read(CHUNK), b""), size, model=model, tag=tag, progress=progress
            )
        return PushOutcome(
            response["manifest_sha256"], response, full=True, local_error=local_error
        )
    with archive:
        plan = plan_push(client, archive)
        if on_plan is not None:
            on_plan(plan)
        outcome = PushOutcome(plan.manifest_sha256, {}, linked=plan.linked)
        outcome.already_stored = plan.distinct - len(plan.uploads) - len(plan.linked)
        for sha, member, member_size in plan.uploads:
            with archive.open_member(member) as reader:
                client.put_blob(sha, reader.iter_chunks(CHUNK), member_size, progress)
            outcome.uploaded_blobs += 1
            outcome.uploaded_bytes += member_size
        body = slim_zip(archive)
    outcome.response = client.post_carton([body], len(body), model=model, tag=tag)
    if outcome.response.get("manifest_sha256") != outcome.manifest_sha256:
        raise ClientError(
            f"the registry stored manifest {outcome.response.get('manifest_sha256')}, "
            f"expected {outcome.manifest_sha256}"
        )
    return outcome


# -- pull ---------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A temp file beside ``path``, renamed over it on success, removed on any failure."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def verify_manifest(path: str | os.PathLike[str] | BinaryIO, expected: str, *, full: bool) -> None:
    try:
        with CartonArchive.open(path, CLIENT_LIMITS) as archive:
            actual = archive.manifest_sha256
            missing = archive.missing_paths() if full else archive.unresolvable_paths()
    except CartonFormatError as exc:
        raise ClientError(f"the downloaded carton is not readable: {exc.message}") from exc
    if actual != expected:
        raise ClientError(f"the downloaded MANIFEST hashes to {actual}, expected {expected}")
    if missing:
        raise ClientError(f"the downloaded carton lacks {', '.join(missing[:5])}")


def pull_carton(
    client: RegistryClient,
    manifest_sha256: str,
    output: str | os.PathLike[str],
    *,
    full: bool = False,
    on_start: Callable[[int | None], None] | None = None,
    progress: Progress | None = None,
) -> int:
    """Download ``/cartons/{sha}.carton`` to ``output`` (atomically, verified); bytes written."""
    written = 0
    with atomic_output(output) as f:
        response = client.stream_carton(manifest_sha256, full=full)
        try:
            length = response.headers.get("content-length")
            if on_start is not None:
                on_start(int(length) if length and length.isdigit() else None)
            for chunk in response.iter_bytes(CHUNK):
                f.write(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        finally:
            response.close()
        f.flush()
        verify_manifest(f, manifest_sha256, full=full)
    return written


# -- hydrate ------------------------------------------------------------------------


class _VerifyingReader(io.RawIOBase):
    """Reads a member and checks its sha256 at the end (raises ClientError on mismatch)."""

    def __init__(self, raw: BinaryIO, path: str, sha256: str) -> None:
        super().__init__()
        self._raw, self._path, self._sha = raw, path, sha256
        self._h = hashlib.sha256()
        self._checked = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self._raw.read(size if size is not None else -1)
        if data:
            self._h.update(data)
        elif not self._checked:
            self._checked = True
            digest = self._h.hexdigest()
            if digest != self._sha:
                raise ClientError(
                    f"{self._path}: content in the zip hashes to {digest}, "
                    f"MANIFEST says {self._sha}"
                )
        return data

    def close(self) -> None:
        self._raw.close()
        super().close()


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc) == (pb.scheme, pb.netloc)


def fetch_verified(
    http: httpx.Client,
    path: str,
    sha256: str,
    urls: list[str],
    dest: BinaryIO,
    *,
    auth_origin: str | None = None,
    token: str | None = None,
    progress: Progress | None = None,
) -> str:
    """Write the first URL whose (decoded) bytes hash to ``sha256`` into ``dest``; its URL."""
    failures: list[str] = []
    for url in urls:
        dest.seek(0)
        dest.truncate()
        headers = {}
        if token and auth_origin and _same_origin(url, auth_origin):
            headers["Authorization"] = f"Bearer {token}"
        h = hashlib.sha256()
        try:
            with http.stream("GET", url, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    reason = _error_message(response)
                    failures.append(f"{url}: HTTP {response.status_code} {reason}")
                    continue
                for chunk in response.iter_bytes(CHUNK):
                    h.update(chunk)
                    dest.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
        except httpx.HTTPError as exc:
            failures.append(f"{url}: {type(exc).__name__}: {exc}")
            continue
        digest = h.hexdigest()
        if digest == sha256:
            dest.flush()
            return url
        failures.append(f"{url}: content hashes to {digest}, MANIFEST says {sha256}")
    raise ClientError(f"{path}: no LINKS URL gave the right bytes: " + "; ".join(failures))


def hydrate_carton(
    slim: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    token: str | None = None,
    registry_url: str | None = None,
    timeout: float = 300.0,
    on_fetch: Callable[[str, str], None] | None = None,
    progress: Progress | None = None,
) -> str:
    """Write a full carton (every file inline, no LINKS) from a slim one; its manifest hash.

    Every LINKS URL of a file is tried in turn until one gives bytes hashing to
    the MANIFEST entry; files inside the zip are verified too. The output
    appears only when complete.
    """
    try:
        archive = CartonArchive.open(slim, CLIENT_LIMITS)
    except CartonFormatError as exc:
        raise ClientError(f"{slim}: {exc.message}") from exc
    out_path = Path(output)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        archive,
        tempfile.TemporaryDirectory(prefix=".hydrate-", dir=out_path.parent) as tmpdir,
        httpx.Client(follow_redirects=True, timeout=httpx.Timeout(timeout, connect=10.0)) as http,
    ):
        links = archive.links or {}
        fetched: dict[str, Path] = {}
        for entry in archive.manifest:
            if entry.path in archive.members or entry.sha256 in fetched:
                continue
            urls = links.get(entry.sha256)
            if not urls:
                raise ClientError(f"{entry.path}: not in the zip and LINKS has no URL for it")
            tmp = Path(tmpdir) / entry.sha256
            with tmp.open("w+b") as dest:
                url = fetch_verified(
                    http,
                    entry.path,
                    entry.sha256,
                    urls,
                    dest,
                    auth_origin=registry_url,
                    token=token,
                    progress=progress,
                )
            if on_fetch is not None:
                on_fetch(entry.path, url)
            fetched[entry.sha256] = tmp

        def opener(path: str, sha: str) -> Callable[[], BinaryIO]:
            if path in archive.members:
                return lambda: _VerifyingReader(archive.open_member(path), path, sha)  # type: ignore[return-value]
            return lambda: fetched[sha].open("rb")

        raw = archive.manifest.raw
        members: list[tuple[str, Callable[[], BinaryIO], int]] = [
            (MANIFEST_NAME, lambda: io.BytesIO(raw), STORED)
        ]
        members += [(e.path, opener(e.path, e.sha256), ZSTD) for e in archive.manifest]
        with atomic_output(out_path) as f:
            write_zip(f, members)
        return archive.manifest_sha256
