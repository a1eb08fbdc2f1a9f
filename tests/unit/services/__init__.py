"""The service verbs on the memory blob store and a migrated SQLite file: no HTTP, no servers.

May import ``registry.services`` and what it builds on, and ``tests.helpers``; never
``registry.http`` or the CLI (``tests/integration/`` covers those).
"""
