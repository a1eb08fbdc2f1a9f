"""A bare ASGI app for the push figure's receive ceiling: what uvicorn alone achieves.

`/discard` counts the body; `/file` also writes it to a temp file, as any
spooling receiver must. Run by harness/servers.py on the same uvicorn as the registry.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    total = 0
    out = None
    if scope["path"] == "/file":
        fd, name = tempfile.mkstemp(prefix="recv-", dir=os.environ.get("RECV_DIR"))
        out = os.fdopen(fd, "wb", buffering=0)
    try:
        while True:
            message = await receive()
            body = message.get("body", b"")
            total += len(body)
            if out is not None and body:
                out.write(body)
            if not message.get("more_body"):
                break
    finally:
        if out is not None:
            out.close()
            os.unlink(name)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(total).encode()})
