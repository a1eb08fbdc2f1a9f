"""The wiring every service call needs: settings, database, blob store, observers, caches."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from registry.blobstore import BlobStore, open_blobstore
from registry.carton.limits import ArchiveLimits
from registry.chunking import ChunkParams
from registry.db.engine import (
    core_transaction,
    is_sqlite,
    make_engine,
    make_sessionmaker,
    transaction,
)
from registry.errors import StorageNotReady
from registry.services.caches import Caches
from registry.services.observers import Observers
from registry.settings import Settings, redact_url

UPGRADE_HINT = "run `carton-registry db upgrade` to migrate it"


@dataclass
class RegistryContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    blobs: BlobStore
    observers: Observers = field(default_factory=Observers)
    caches: Caches = field(default_factory=Caches)
    # How files are cut into chunks; announced to clients, so both sides cut alike.
    chunk_params: ChunkParams = field(default_factory=ChunkParams)

    @classmethod
    def open(cls, settings: Settings, *, migrate: bool = False) -> RegistryContext:
        engine = make_engine(settings.database_url)
        if migrate:
            from registry.db.migrate import upgrade

            upgrade(engine)
        return cls(
            settings=settings,
            engine=engine,
            sessions=make_sessionmaker(engine),
            blobs=open_blobstore(settings),
        )

    @classmethod
    def open_existing(cls, settings: Settings) -> RegistryContext:
        """The registry a server already set up, or ``StorageNotReady``; creates nothing.

        For operator commands: pointed at the wrong place (another folder, a typo in
        ``REGISTRY_DATABASE_URL``), they must say so rather than make a new empty registry.
        """
        from registry.db.migrate import revisions

        url = settings.database_url
        where = f"database {redact_url(url)}"
        if is_sqlite(url):
            path = make_url(url).database
            if not path or path == ":memory:" or not Path(path).is_file():
                raise StorageNotReady(
                    f"{where} does not exist; point REGISTRY_DATABASE_URL (or REGISTRY_DATA_DIR) "
                    "at the server's storage"
                )
        engine = make_engine(url)
        try:
            current, head = revisions(engine)
        except SQLAlchemyError as exc:
            engine.dispose()
            cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise StorageNotReady(f"cannot open {where}: {cause}") from exc
        if current != head:
            engine.dispose()
            if current is None:
                raise StorageNotReady(f"{where} holds no registry tables; {UPGRADE_HINT}")
            raise StorageNotReady(
                f"{where} is at revision {current}, this carton-registry needs {head}; "
                f"{UPGRADE_HINT}"
            )
        return cls(
            settings=settings,
            engine=engine,
            sessions=make_sessionmaker(engine),
            blobs=open_blobstore(settings),
        )

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with transaction(self.sessions) as session:
            yield session

    @contextmanager
    def core_transaction(self) -> Iterator[Connection]:
        """A write transaction on a bare connection (``db.engine.core_transaction``)."""
        with core_transaction(self.engine) as connection:
            yield connection

    @property
    def archive_limits(self) -> ArchiveLimits:
        """What uploads are opened with: the settings' own (``REGISTRY_MAX_MEMBERS`` ...)."""
        return self.settings.archive

    def close(self) -> None:
        self.blobs.close()
        self.engine.dispose()
