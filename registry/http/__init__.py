"""The HTTP edge: thin Litestar handlers over ``registry.services`` (the only async code).

- ``api.py`` the JSON API under /api/v1, its bodies typed in ``schemas.py``;
- ``cartons.py``, ``blobs.py`` downloads, built on ``conditional.py`` (ETag, Range),
  ``coding.py`` (Accept-Encoding, compressing) and ``streaming.py`` (sync iterators
  as bodies);
- ``v2.py`` Triton / KServe v2; ``web.py`` the HTML pages; ``health.py``, ``metrics.py``;
- ``auth.py`` the scope guards on every route; ``errors.py`` the one table from errors
  to statuses; ``middleware.py`` access logs, metrics, security headers and HEAD;
  ``routing.py`` ``get`` for GET and HEAD; ``deps.py`` request helpers (bounded,
  idle-timed body reads); ``overload.py`` the ingest gate; ``server.py`` uvicorn's
  connection timeouts.

Handlers parse the request, call a service in a worker thread and shape the answer;
they open no database session and make no storage decision themselves. May import
``registry.services``, ``registry.errors``, ``registry.settings``, ``registry.humanize``
(how sizes, times and shares read, shared with the CLI), the package's ``__version__``,
the carton format's stream helpers (``registry.carton.streams``) and the v2 wire
format's documents and request parsing (``registry.triton.documents``,
``registry.triton.requests``); ``errors.py`` also the blob store's, the carton format's
and the Triton wire format's error classes it maps. Only ``registry.app`` (the app
factory) and the CLI's ``serve`` sit above it: nothing below ``http/`` imports this package.
"""
