"""A tiny Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no dependencies).

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and
events on fd 4. Enough to emulate a device size (a desktop window cannot be
narrower than 500 px, a phone is 390), navigate, run a script, read the DOM
and take screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any


class CDPError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str, profile: Path) -> None:
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # in the child: its fd 3 reads commands, fd 4 writes replies
            high_r, high_w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),  # kept open through exec: wire_fds put the pipes there
            preexec_fn=wire_fds,  # runs before exec; only dup2
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._out, self._in = to_chrome_w, from_chrome_r
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable", session=True)

    # -- protocol -------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CDPError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._in], [], [], remaining)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise CDPError("Chromium closed the pipe")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)  # type: ignore[no-any-return]

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = False,
        timeout: float = 30,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})  # type: ignore[no-any-return]
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(i)
            self._events.append(self._read_message(deadline))

    # -- page helpers ---------------------------------------------------------------

    def viewport(self, width: int, height: int, scale: float = 1, mobile: bool = False) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile},
            session=True,
        )

    def goto(self, url: str) -> None:
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        result = self.call("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise CDPError(f"navigate to {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def submit_and_wait(self, expression: str) -> None:
        """Run a script that navigates (a form submit, a click) and wait for the new page."""
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        self.evaluate(expression)
        self.wait_event("Page.loadEventFired")

    def dom(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._out)
        os.close(self._in)
