"""The index: SQLAlchemy tables (``tables``), engines and sessions (``engine``), the
dialect-aware statements the services share (``queries``) and migrations (``migrate``,
which runs the Alembic scripts of ``migrations/``).

Imports SQLAlchemy, Alembic and its own scripts (``registry.migrations``) only: never
the services, the blob store or anything above them.
"""
