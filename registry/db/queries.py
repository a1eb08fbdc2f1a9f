"""Dialect-aware statements shared by the services."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, String, Table, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql import coercions, roles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.sqltypes import NullType
from sqlalchemy.sql.type_api import TypeEngine
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

from registry.db.tables import CartonFile

T = TypeVar("T")


def dialect_insert(dialect: str, table: Table) -> postgresql.Insert | sqlite.Insert:
    """``table``'s INSERT in ``dialect``'s own construct, which has ``ON CONFLICT``."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def insert_ignore(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING: concurrent pushes may add the same row."""
    if not rows:
        return
    stmt = dialect_insert(session.get_bind().dialect.name, table).on_conflict_do_nothing()
    session.execute(stmt, list(rows))


def insert_ignore_returning(
    session: Session, table: Table, rows: Sequence[dict[str, Any]], column: Any
) -> set[Any]:
    """``insert_ignore``, returning ``column`` of the rows this statement really inserted."""
    if not rows:
        return set()
    dialect = session.get_bind().dialect.name
    stmt = dialect_insert(dialect, table).on_conflict_do_nothing().returning(column)
    return set(session.scalars(stmt, list(rows)))


class StringList(TypeDecorator[Collection[str]]):
    """A list of strings bound as one parameter: a JSON array on SQLite (read back with
    ``json_each``), a ``text[]`` on Postgres. A statement over one such parameter has one
    shape whatever the list's length, so it is compiled and prepared once, and binding it
    costs one value, not one per element (``in_list``)."""

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.ARRAY(String()))
        return dialect.type_descriptor(String())

    def process_bind_param(self, value: Collection[str] | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        return list(value) if dialect.name == "postgresql" else json.dumps(list(value))


class in_list(ColumnElement[bool]):  # named as a function: used as one, like ``in_``
    """``column IN`` the strings of the parameter ``name`` (a ``StringList``), for any
    number of them: one statement per batch of chunks, where an expanding ``IN`` list
    rendered and bound each hash on its own and was cut into ``IN_CHUNK`` slices."""

    inherit_cache = True
    type = NullType()  # type: ignore[assignment]  # Boolean: SQLite gets "IN (...) = 1", no index
    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, column: ColumnElement[str] | QueryableAttribute[str], name: str) -> None:
        self.column: ColumnElement[str] = coercions.expect(roles.ExpressionElementRole, column)
        self.param = bindparam(name, type_=StringList())


def list_values(name: str, dialect: str) -> ColumnElement[str]:
    """The strings of the parameter ``name`` (a ``StringList``) as a column to select
    from, on ``dialect`` (``in_list``'s counterpart for ``INSERT ... SELECT``)."""
    param = bindparam(name, type_=StringList())
    if dialect == "postgresql":
        return func.unnest(param).table_valued("value").render_derived().c.value
    return func.json_each(param).table_valued("value").c.value


@compiles(in_list)
def _in_json_array(element: in_list, compiler: SQLCompiler, **kw: Any) -> str:
    column, param = compiler.process(element.column, **kw), compiler.process(element.param, **kw)
    return f"{column} IN (SELECT value FROM json_each({param}))"


@compiles(in_list, "postgresql")
def _in_array(element: in_list, compiler: SQLCompiler, **kw: Any) -> str:
    column, param = compiler.process(element.column, **kw), compiler.process(element.param, **kw)
    return f"{column} = ANY({param})"


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
