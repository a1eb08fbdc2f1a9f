"""Alembic migrations on real SQLite and Postgres databases; may import ``registry.db``."""
