"""The Triton / KServe v2 verbs over the registry: framework-free and synchronous.

``repository`` (index, load, unload), ``metadata`` (server and model metadata,
configs, readiness), ``self_tests`` (a carton's self test as an infer request,
and the verdict on a server's answer); ``versions`` finds the model version a
v2 URL names. Each takes a :class:`RegistryContext` and plain values and
returns the documents of ``registry.triton.documents``.

May import: ``registry.triton`` for the wire formats and the carton <-> Triton
mapping, ``registry.carton``, ``registry.db``, ``registry.errors`` and the other
services; never ``registry.http`` or ``registry.cli``.
"""
