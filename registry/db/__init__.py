"""The index: SQLAlchemy tables, engines and migrations."""
