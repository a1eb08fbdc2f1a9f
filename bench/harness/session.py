"""One benchmark run: its scale, clock and budget, work directory, client and servers.

Figures receive the ``Bench`` and take from it what they share: the servers
(started once, restarted when a figure left them dead), the Postgres database,
and ``pushed``, the carton figure 1 pushed last, which later figures re-push,
vary, pull and load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.harness import REPO, VENV_BIN, GiB, MiB
from bench.harness.clients import TIMEOUT
from bench.harness.data import BuiltCarton, FileSpec, build_carton, build_carton_sized
from bench.harness.servers import Server, start_peer, start_registry, stop_all


@dataclass(frozen=True)
class Scale:
    """How much data and how many runs: all that ``--quick`` changes."""

    quick: bool
    runs: int
    stored_size: int  # the Stored carton of figures 1-5
    zstd_content: int  # content of the zstd carton (the carton is about half of it)
    mem_size: int  # moved once per process in figure 6
    wrk_seconds: int  # per load run in figure 5
    models: int  # listing rows in figure 7
    file_rows: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Scale:
        quick = args.quick
        return cls(
            quick=quick,
            runs=1 if quick else args.runs,
            stored_size=256 * MiB if quick else 1 * GiB,
            zstd_content=256 * MiB if quick else 1 * GiB,
            mem_size=512 * MiB if quick else 2 * GiB,
            wrk_seconds=3 if quick else args.wrk_seconds,
            models=10_000 if quick else 100_000,
            file_rows=100_000 if quick else 1_000_000,
        )


@dataclass
class Pushed:
    """The Stored carton figure 1 pushed last, with what the later figures need of it."""

    carton: BuiltCarton
    seconds: float  # its push's wall time
    sha256: str  # of the whole file: the peer's blob digest
    manifest: str  # manifest_sha256, as the registry answered


@dataclass
class Fine:
    """A carton the CLI pushed, and a variant of it whose one large file changed in one
    region (figure 8), for figure 9 to pull with the base in the CLI's chunk cache."""

    base: BuiltCarton
    variant: BuiltCarton
    changed: int  # bytes the variant rewrote


class Bench:
    """The run every figure measures in; ``cleanup()`` stops its servers and removes its data."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.scale = Scale.from_args(args)
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.work = Path(args.workdir or REPO / "bench" / "out" / f"run-{stamp}").absolute()
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs = self.work / "logs"
        self.logs.mkdir(exist_ok=True)
        self.client = httpx.Client(timeout=TIMEOUT)
        self.reg: Server | None = None
        self.peer: Server | None = None
        self.pg_db: str | None = None
        self.tag = f"{os.getpid()}-{int(time.time())}"  # seeds: fresh bytes every run
        self.pushed: Pushed | None = None
        self.fine: Fine | None = None

    def log(self, msg: str) -> None:
        el = time.monotonic() - self.started
        print(f"[{el:6.1f}s] {msg}", flush=True)

    def left(self) -> float:
        """Seconds of the time budget left; figures stop their runs early below their need."""
        return self.deadline - time.monotonic()

    # -- databases ---------------------------------------------------------------

    def pg_url(self, name: str) -> str:
        return f"{self.args.pg_url.rsplit('/', 1)[0]}/{name}"

    def db_url(self) -> str | None:
        """The registry's database: SQLite in its data dir, or one fresh Postgres database."""
        if self.args.backend != "postgres":
            return None
        if self.pg_db is None:
            self.pg_db = self.create_pg_db("bench_reg")
        return self.pg_url(self.pg_db)

    def create_pg_db(self, prefix: str) -> str:
        import psycopg

        name = f"{prefix}_{os.getpid()}_{int(time.time()) % 100000}"
        with psycopg.connect(self.args.pg_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_pg_db(self, name: str) -> None:
        import psycopg

        with (
            contextlib.suppress(Exception),
            psycopg.connect(self.args.pg_url, autocommit=True, connect_timeout=5) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- servers -----------------------------------------------------------------

    def start_registry(
        self,
        workers: int | None = 1,
        label: str = "registry",
        data_dir: Path | None = None,
        database_url: str | None = None,
        server: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> Server:
        """A registry on the run's data dir and database, unless given others;
        ``workers=None``: serve's default worker count (1)."""
        return start_registry(
            data_dir or self.work / "registry-data",
            self.logs / f"{label}.log",
            database_url=database_url or self.db_url(),
            workers=workers,
            server=server or self.args.server,
            settings=settings,
        )

    def start_peer(self, label: str = "peer") -> Server:
        return start_peer(self.work / "peer-data", self.logs / f"{label}.log")

    def ensure_servers(self) -> tuple[Server, Server]:
        """(registry, peer), started if not running."""
        if self.reg is None or self.reg.proc.poll() is not None:
            self.reg = self.start_registry()
        if self.peer is None or self.peer.proc.poll() is not None:
            self.peer = self.start_peer()
        return self.reg, self.peer

    def stop_servers(self) -> None:
        for s in (self.reg, self.peer):
            if s is not None:
                s.stop()
        self.reg = self.peer = None

    # -- data and tools ----------------------------------------------------------

    def build(
        self, name: str, files: list[FileSpec], zstd: bool = False, sized: bool = False
    ) -> BuiltCarton:
        """A carton in the work dir: the stream writer's shape (data descriptors), or with
        ``sized`` the reference packer's (sizes and CRCs in the local headers; Stored only)."""
        t = time.perf_counter()
        out = self.work / f"{name}.carton"
        if sized:
            if zstd:
                raise ValueError("sized cartons are Stored only (StoredZipLayout)")
            c = build_carton_sized(out, name, files)
        else:
            c = build_carton(out, name, files, zstd=zstd)
        self.log(f"built {c.path.name}: {c.size / MiB:.0f} MiB in {time.perf_counter() - t:.1f}s")
        return c

    def cli_exe(self) -> Path | None:
        """The project's ``carton-registry`` command, if the venv has it."""
        exe = VENV_BIN / "carton-registry"
        return exe if exe.exists() else None

    @property
    def cli_cache(self) -> Path:
        """The CLI's cache folder in this run (chunks, verified cartons): never the user's."""
        return self.work / "cli-cache"

    def cli_env(self) -> dict[str, str]:
        """The environment CLI runs get: no REGISTRY_* settings, the run's own cache."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
        env["XDG_CACHE_HOME"] = str(self.cli_cache)
        return env

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        self.stop_servers()
        stop_all()
        if self.pg_db:
            self.drop_pg_db(self.pg_db)
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
