"""The wiring every service call needs: settings, database, blob store, observers, caches."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from registry.blobstore import BlobStore, open_blobstore
from registry.blobstore.chunking import ChunkParams
from registry.carton.limits import ArchiveLimits
from registry.db.engine import make_engine, make_sessionmaker, transaction
from registry.services.caches import Caches
from registry.services.observers import Observers
from registry.settings import Settings


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

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with transaction(self.sessions) as session:
            yield session

    @property
    def archive_limits(self) -> ArchiveLimits:
        s = self.settings
        return ArchiveLimits(
            max_members=s.max_members,
            max_unpacked_bytes=s.max_unpacked_bytes,
            max_compression_ratio=s.max_compression_ratio,
            compression_ratio_min_bytes=s.compression_ratio_min_bytes,
            max_carton_toml_bytes=s.max_carton_toml_bytes,
        )

    def close(self) -> None:
        self.blobs.close()
        self.engine.dispose()
