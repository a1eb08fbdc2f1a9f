"""The verbs: framework-free, synchronous, one transaction per call, no HTTP.

Each takes a ``RegistryContext`` (``context``: settings, database, blob store,
``observers``, ``caches``) and raises the domain errors of ``registry.errors`` (or lets
the blob store's and the carton format's own errors through; one table at the HTTP
edge maps them all). Where things are:

- push: ``ingest`` (orchestration) -> ``ingest_bytes`` (bytes first) -> ``ingest_rows``
  (rows second); ``blobs`` (single-blob uploads, dedup queries); ``linkfetch`` (LINKS,
  allow-listed and pinned); ``leases`` (pushes vs GC); ``uploads`` (spooled bodies)
- reads: ``cartons``, ``models``, ``listing`` (the model list and its index columns),
  ``references`` (name, name:version, name@tag, hash), ``stats``, ``webviews`` (pages)
- writes: ``tags``, ``deletes``; pull: ``export`` (rebuilt slim/full cartons)
- maintenance: ``gc``, ``fsck``; ``auth`` (tokens); ``triton`` (the v2 protocol)
- shared: ``names`` (name, version and digest rules), ``rendering`` (JSON values),
  ``caches`` and ``observers`` (what the context holds between calls)

May import ``registry.carton``, ``registry.blobstore``, ``registry.db``,
``registry.settings`` and ``registry.errors``; never ``registry.http`` or the CLI.
"""
