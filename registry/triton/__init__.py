"""Triton / KServe v2 wire formats: pure, no DB, no HTTP, no I/O.

What lives here: the binary tensor data codec (``codec``, ``json_tensors``,
``wire``), the carton <-> Triton dtype, shape and config mapping (``mapping``),
request parsing (``requests``), the JSON documents the v2 protocol answers with
(``documents``, msgspec structs) and the self-test output comparison
(``compare``). Errors are this package's own (``errors``).

May import: the standard library, numpy and msgspec; nothing else of
``registry`` (``services`` calls this package, never the other way round).
"""
