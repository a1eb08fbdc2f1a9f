"""Alembic migrations, installed as registry.migrations (see pyproject package-dir)."""
