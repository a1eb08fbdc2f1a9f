"""Dialect-aware statements shared by the services."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from registry.db.tables import CartonFile

T = TypeVar("T")


def insert_ignore(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING: concurrent pushes may add the same row."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    stmt = module.insert(table).on_conflict_do_nothing()
    session.execute(stmt, list(rows))


def insert_ignore_returning(
    session: Session, table: Table, rows: Sequence[dict[str, Any]], column: Any
) -> set[Any]:
    """``insert_ignore``, returning ``column`` of the rows this statement really inserted."""
    if not rows:
        return set()
    dialect = session.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    stmt = module.insert(table).on_conflict_do_nothing().returning(column)
    return set(session.scalars(stmt, list(rows)))


# Bound on the values in one ``IN (...)`` list (SQLite's variable limit, plan size).
IN_CHUNK = 500


def in_chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``values`` in slices small enough for one ``IN (...)`` list each."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def referenced_blobs(session: Session, hashes: Sequence[str]) -> set[str]:
    """The subset of ``hashes`` that some carton file names."""
    found: set[str] = set()
    for chunk in in_chunks(hashes):
        found.update(
            session.scalars(
                select(CartonFile.blob_sha256).where(CartonFile.blob_sha256.in_(chunk)).distinct()
            )
        )
    return found


def cartons_using(session: Session, hashes: Sequence[str]) -> dict[str, list[str]]:
    """Manifest hash -> the given blobs its files name (sorted), for every carton naming one."""
    per_carton: dict[str, set[str]] = {}
    for chunk in in_chunks(hashes):
        rows = session.execute(
            select(CartonFile.manifest_sha256, CartonFile.blob_sha256)
            .where(CartonFile.blob_sha256.in_(chunk))
            .distinct()
        )
        for manifest, sha in rows:
            per_carton.setdefault(manifest, set()).add(sha)
    return {manifest: sorted(shas) for manifest, shas in per_carton.items()}
