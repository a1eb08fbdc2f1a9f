"""The HTTP edge: thin Litestar handlers over ``registry.services`` (the only async code).

- ``api.py`` the JSON API under /api/v1, its bodies typed in ``schemas.py``;
- ``cartons.py``, ``blobs.py`` downloads, built on ``conditional.py`` (ETag, Range),
  ``coding.py`` (Accept-Encoding, compressing) and ``streaming.py`` (sync iterators
  as bodies);
- ``v2.py`` Triton / KServe v2; ``web.py`` the HTML pages; ``health.py``, ``metrics.py``;
- ``auth.py`` the scope guards on every route; ``errors.py`` the one table from errors
  to statuses; ``middleware.py`` access logs and metrics; ``deps.py`` request helpers.

Handlers parse the request, call a service in a worker thread and shape the answer;
they open no database session and make no storage decision themselves. May import
``registry.services``, ``registry.errors``, ``registry.settings``, ``registry.humanize``
(how sizes, times and shares read, shared with the CLI) (and, in ``errors.py``
only, the blob store's and carton format's error classes it maps); nothing below
``http/`` imports this package.
"""
