"""Triton / KServe v2 wire formats: pure, no DB, no HTTP, no I/O.

What lives here: the binary tensor data codec (``codec``, ``json_tensors``,
``wire``) and the carton <-> Triton dtype mapping (``mapping``). Errors are this
package's own (``errors``).

May import: the standard library and numpy; nothing else of ``registry``
(``services`` calls this package, never the other way round).
"""
