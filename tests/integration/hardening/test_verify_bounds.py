"""Self-test verify resolves the model and self test first, reads no more body than the
expected outputs can need, and parses it without copies (issue 12), on every backend pair."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from registry.services.triton.self_tests import VERIFY_BODY_ALLOWANCE
from registry.triton.wire import encode_infer_response, json_size_bound
from tests.conftest import fixture_carton
from tests.integration.hardening.memory import MiB, peak_rss
from tests.integration.v2.conftest import push
from tests.integration.v2.test_self_tests import expected_wire, post_verify

NAME = "selftest_identity"  # fixture 02
FLOOD_BYTES = 96 * MiB
MEMORY_BOUND = 160 * MiB  # the whole process, during three floods at once


def verify_url(live_server, name: str = NAME) -> str:
    return f"{live_server.url}/v2/models/{name}/self_tests/0/verify"


def test_an_unknown_model_is_answered_before_the_body_arrives(live_server):
    """Headers announcing 200 MiB, no body: the 404 comes at once, not after a read."""
    host, port = live_server.url.removeprefix("http://").split(":")
    for path, status in [
        ("/v2/models/nobody/self_tests/0/verify", b"404"),
        ("/v2/models/nobody/versions/7/self_tests/0/verify", b"404"),
    ]:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            started = time.monotonic()
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {200 * MiB}\r\n\r\n".encode()
            )
            answer = sock.recv(4096)
            assert answer.split(b" ")[1] == status, answer
            assert time.monotonic() - started < 5


def test_the_body_is_bounded_by_the_expected_outputs(live_server):
    push(live_server, fixture_carton("02"))
    outputs = expected_wire("02")
    bound = sum(json_size_bound(t) for t in outputs) + VERIFY_BODY_ALLOWANCE
    # the expected outputs in JSON, padded with whitespace up to the bound: accepted
    body, _ = encode_infer_response(NAME, outputs, binary=False)
    padded = body[:-1] + b" " * (bound - len(body)) + b"}"
    response = post_verify(live_server, NAME, padded, None)
    assert response.status_code == 200 and response.json()["passed"], response.text
    # one byte more: refused, declared or streamed
    over = padded[:-1] + b" }"
    assert post_verify(live_server, NAME, over, None).status_code == 413
    streamed = httpx.post(verify_url(live_server), content=iter([over[:100], over[100:]]))
    assert streamed.status_code == 413
    assert "limit" in streamed.json()["error"]


def chunks(total: int, size: int = MiB):
    block = b" " * size
    for _ in range(total // size):
        yield block


def test_a_flood_of_large_verify_bodies_keeps_memory_bounded(live_server):
    push(live_server, fixture_carton("02"))

    def flood(name: str) -> int:
        body = chunks(FLOOD_BYTES)  # streamed (no Content-Length): the server must count
        return httpx.post(verify_url(live_server, name), content=body, timeout=60).status_code

    with peak_rss() as memory, ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(flood, [NAME, NAME, NAME, "nobody", "nobody", "nobody"]))
    assert statuses == [413, 413, 413, 404, 404, 404]
    assert memory.growth < MEMORY_BOUND, f"RSS grew {memory.growth / MiB:.0f} MiB"
