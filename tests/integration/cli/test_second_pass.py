"""The CLI's second pass (issue 26), driven as a user drives it: the installed
``carton-registry`` script in a subprocess, from a folder outside the checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import fixture_carton
from tests.integration.cli.conftest import (
    CARTON_TOML,
    assert_no_traceback,
    make_carton,
    manifest_hash,
    member_bytes,
    zip_bytes,
)


def make_carton_bytes(name: str, files: dict[str, bytes] | None = None) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return make_carton(Path(tmp) / "c.carton", name, files or {"w": b"weights"}).read_bytes()


pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def backend() -> str:
    """The command line is the subject here, not the storage: one backend pair is enough."""
    return "sqlite-fs"


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- 2. references ----------------------------------------------------------------------------


def test_a_version_reference_may_be_written_as_ls_shows_it(installed, live_server):
    installed.env["REGISTRY_URL"] = live_server.url
    sha = installed("push", str(fixture_carton("02"))).last_line
    for ref in ("selftest_identity:v1", "selftest_identity:V1", "selftest_identity:1"):
        info = installed("info", ref, "--json")
        assert info.code == 0, (ref, info.err)
        assert json.loads(info.out)["manifest_sha256"] == sha
    pulled = installed("pull", "selftest_identity:v1", "-o", "m.carton")
    assert pulled.code == 0, pulled.err
    assert pulled.last_line == sha
    missing = installed("info", "selftest_identity:v7")
    assert missing.code == 1 and "has no version 7" in missing.error


def test_a_typo_in_a_model_name_suggests_the_nearest_names(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    for name in ("resnet50", "resnet18", "bert-base"):
        carton = make_carton(tmp_path / f"{name}.carton", name, {"w": name.encode()})
        assert installed("push", str(carton)).code == 0
    for argv in (("pull", "resnt50"), ("info", "resnt50:v1"), ("versions", "resnt50")):
        run = installed(*argv)
        assert run.code == 1, argv
        assert "no model named 'resnt50'; did you mean 'resnet50'" in run.error, argv
    far = installed("info", "zzzzzz")
    assert far.code == 1 and "did you mean" not in far.error
    assert files_in(installed.cwd) == []


# --- 3. push refuses locally -----------------------------------------------------------------


def test_push_refuses_a_non_carton_before_sending_a_byte(cli, live_server, tmp_path):
    big = tmp_path / "weights.bin"
    big.write_bytes(b"\x00" * (4 << 20))
    plain = tmp_path / "plain.zip"
    plain.write_bytes(zip_bytes({"README": b"no MANIFEST here"}))
    for path in (big, plain):
        for extra in ((), ("--full",)):
            run = cli("push", str(path), *extra, "--url", live_server.url)
            assert run.code == 1, run.out
            assert run.err.strip().startswith(f"error: {path}: "), run.err
            assert "sending it whole" not in run.err and "(HTTP" not in run.err
            assert run.client.bytes_sent == 0
            assert not any(m == "POST" for m, _ in run.client.requests)


def test_push_with_a_model_that_contradicts_carton_toml(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    carton = make_carton(tmp_path / "c.carton", "alpha", {"w": b"weights"})
    for extra in ((), ("--full",)):
        run = installed("push", str(carton), "--model", "beta", *extra)
        assert run.code == 1
        assert "'alpha'" in run.error and "'beta'" in run.error, run.err
    assert installed("ls", "--json").out.strip() == "[]"
    same = installed("push", str(carton), "--model", "alpha")
    assert same.code == 0, same.err


def test_the_registry_refuses_a_contradicting_model_parameter(client):
    data = make_carton_bytes("alpha")
    r = client.post("/api/v1/cartons", params={"model": "beta"}, content=data)
    assert r.status_code == 400
    assert "'alpha'" in r.json()["error"] and "'beta'" in r.json()["error"]
    assert client.get("/api/v1/models").json()["models"] == []
    ok = client.post("/api/v1/cartons", params={"model": "alpha"}, content=data)
    assert ok.status_code in (200, 201), ok.text


# --- 4. where pull and hydrate write -----------------------------------------------------------


def test_pull_output_stdout_folder_missing_parent_and_existing_files(installed, live_server):
    installed.env["REGISTRY_URL"] = live_server.url
    sha = installed("push", str(fixture_carton("02"))).last_line
    web_name = f"selftest_identity-{sha[:12]}.carton"
    expected = httpx.get(f"{live_server.url}/cartons/{sha}.carton").content

    # -o - : the carton on stdout, messages on stderr, no file named "-"
    proc = subprocess.run(
        installed.command(("pull", "selftest_identity", "-o", "-")),
        cwd=installed.cwd,
        env=installed.env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    assert sha in proc.stderr.decode()
    assert files_in(installed.cwd) == []

    # -o DIR: the default name inside it
    (installed.cwd / "models").mkdir()
    into = installed("pull", "selftest_identity", "-o", "models")
    assert into.code == 0, into.err
    assert (installed.cwd / "models" / web_name).read_bytes() == expected

    # a missing parent folder is an error, and creates nothing
    for target in ("nowhere/m.carton", "nowhere/"):
        missing = installed("pull", "selftest_identity", "-o", target)
        assert missing.code == 1
        assert "nowhere: no such folder" in missing.error, missing.err
    assert not (installed.cwd / "nowhere").exists()

    # an existing different file is kept, unless --force
    other = installed.cwd / "m.carton"
    other.write_bytes(b"my own notes")
    kept = installed("pull", "selftest_identity", "-o", "m.carton")
    assert kept.code == 1 and "m.carton exists" in kept.error and "--force" in kept.error
    assert other.read_bytes() == b"my own notes"
    assert files_in(installed.cwd) == ["m.carton", "models"]
    forced = installed("pull", "selftest_identity", "-o", "m.carton", "--force")
    assert forced.code == 0, forced.err
    assert other.read_bytes() == expected
    # the same carton again: nothing to refuse
    again = installed("pull", "selftest_identity", "-o", "m.carton")
    assert again.code == 0, again.err
    assert other.read_bytes() == expected


def test_hydrate_picks_a_name_and_takes_the_same_output_forms(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    carton = make_carton(tmp_path / "c.carton", "linked", {"big.bin": bytes(range(256)) * 1024})
    sha = installed("push", str(carton)).last_line
    pulled = installed("pull", sha)
    assert pulled.code == 0, pulled.err
    slim = next(installed.cwd.glob("*.carton"))
    hydrated = installed("hydrate", slim.name)
    assert hydrated.code == 0, hydrated.err
    full_name = slim.name.removesuffix(".carton") + "-full.carton"
    assert manifest_hash(installed.cwd / full_name) == sha
    (installed.cwd / "x.carton").write_bytes(b"other")
    kept = installed("hydrate", slim.name, "-o", "x.carton")
    assert kept.code == 1 and "--force" in kept.error
    assert (installed.cwd / "x.carton").read_bytes() == b"other"
    missing = installed("hydrate", slim.name, "-o", "no/where.carton")
    assert missing.code == 1 and "no: no such folder" in missing.error


# --- 6. wrong URLs -----------------------------------------------------------------------------


def test_a_url_with_an_api_path_or_without_a_scheme_is_a_usage_error(installed, live_server):
    root = live_server.url
    port = root.rsplit(":", 1)[1]
    for url in (f"{root}/api/v1", f"{root}/api/v1/", f"{root}/v2/models"):
        run = installed("ls", "--url", url)
        assert run.code == 2, (url, run.err)
        assert f"the registry is at its root, {root} " in run.error, run.err
    bare = installed("ls", "--url", f"127.0.0.1:{port}")
    assert bare.code == 2 and "expected http://HOST[:PORT]" in bare.error
    assert installed("ls", "--url", root).code == 0


# --- 7. Ctrl-C at any moment -------------------------------------------------------------------


PYTHON_OWN_START = "Fatal Python error: init_"
"""CPython's own start-up (``init_import_site``, ``init_sys_streams``: before any code of
ours runs) cannot be interrupted quietly; the window is a few ms on an idle machine."""


def before_our_code(stderr: str) -> bool:
    """Whether a Ctrl-C landed in the console script pip wrote, while it imported
    ``registry.script``, before the first line of ours ran (the wrapper, then only the
    import system's own frames): like CPython's start, a window of about a ms that no code
    of ours can close (seen on a host where Python starts in 20 ms)."""
    frames = re.findall(r'^  File "([^"]+)", line \d+', stderr, flags=re.MULTILINE)
    return (
        stderr.startswith("Traceback (most recent call last):")
        and stderr.rstrip().endswith("KeyboardInterrupt")
        and bool(frames)
        and frames[0].endswith(f"{os.sep}carton-registry")
        and all(frame.startswith("<frozen importlib.") for frame in frames[1:])
    )


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.08, 0.12, 0.2, 0.4])
def test_ctrl_c_while_the_command_starts_prints_no_traceback(installed, delay):
    """The signal lands somewhere in start-up (imports, parsing, the first request); wherever
    it lands in our code, the user sees one line at most."""
    proc = installed.start("ls", "--url", "http://127.0.0.1:9")
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if err.startswith(PYTHON_OWN_START) or before_our_code(err):
        return
    assert_no_traceback(err)
    assert proc.returncode in (130, 1, -signal.SIGINT), (proc.returncode, err)
    assert len(err.strip().splitlines()) <= 1, err


def test_only_an_interrupt_before_our_first_line_is_excused():
    """The exemption above is narrow: the wrapper and the import system, nothing of ours."""
    wrapper = "/venv/bin/carton-registry".replace("/", os.sep)
    seen = (  # as seen: the Ctrl-C at 20 ms, while the wrapper imported registry.script
        "Traceback (most recent call last):\n"
        f'  File "{wrapper}", line 3, in <module>\n'
        "    from registry.script import main\n"
        '  File "<frozen importlib._bootstrap>", line 1176, in _find_and_load\n'
        '  File "<frozen importlib._bootstrap_external>", line 474, in cache_from_source\n'
        "KeyboardInterrupt\n"
    )
    assert before_our_code(seen)
    ours = seen.replace(
        "KeyboardInterrupt",
        '  File "/src/registry/script.py", line 9, in <module>\nKeyboardInterrupt',
    )
    assert not before_our_code(ours)
    assert not before_our_code(seen.replace("KeyboardInterrupt", "ImportError: boom"))


def test_ctrl_c_while_the_command_line_loads(monkeypatch, capsys):
    """Deterministically: the interrupt arrives while ``registry.cli`` (httpx with it) loads."""
    import builtins
    import sys

    from registry import script

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "registry.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "registry.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert script.run_command() == 130
    assert capsys.readouterr().err == "interrupted\n"


# --- 8. models with no versions; rm NAME -------------------------------------------------------


def test_a_model_with_no_versions_left(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    carton = make_carton(tmp_path / "c.carton", "gone", {"w": b"weights"})
    assert installed("push", str(carton)).code == 0
    assert httpx.get(f"{live_server.url}/api/v1/stats").json()["models"] == 1
    assert installed("rm", "gone:1").code == 0
    assert httpx.get(f"{live_server.url}/api/v1/stats").json()["models"] == 0
    for argv in (("versions", "gone"), ("info", "gone"), ("pull", "gone")):
        run = installed(*argv)
        assert run.code == 1, argv
        assert "model 'gone' has no versions" in run.error, argv
    assert files_in(installed.cwd) == []


def test_rm_of_a_whole_model_needs_yes(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    for i in (1, 2):
        carton = make_carton(tmp_path / f"{i}.carton", "whole", {"w": bytes([i])})
        assert installed("push", str(carton), "--tag", "prod").code == 0
    unconfirmed = installed("rm", "whole")
    assert unconfirmed.code == 2 and "--yes" in unconfirmed.error
    assert len(json.loads(installed("versions", "whole", "--json").out)) == 2
    tagged = installed("rm", "whole@prod", "--yes")
    assert tagged.code == 2 and "NAME:VERSION or NAME" in tagged.error
    typo = installed("rm", "wohle", "--yes")
    assert typo.code == 1 and "did you mean 'whole'" in typo.error
    removed = installed("rm", "whole", "--yes")
    assert removed.code == 0, removed.err
    assert "removed model whole (2 version(s)" in removed.out
    assert installed("ls", "--json").out.strip() == "[]"
    assert httpx.get(f"{live_server.url}/api/v1/stats").json()["models"] == 0


# --- 14. small things --------------------------------------------------------------------------


def test_hydrate_says_where_each_file_came_from(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    big = bytes(range(256)) * 1024
    carton = make_carton(tmp_path / "c.carton", "h", {"big.bin": big})
    sha = installed("push", str(carton)).last_line
    assert installed("pull", sha, "-o", "slim.carton").code == 0
    first = installed("hydrate", "slim.carton", "-o", "a.carton")
    assert first.code == 0, first.err
    assert f"fetched big.bin from {live_server.url}/blobs/" in first.err
    second = installed("hydrate", "slim.carton", "-o", "b.carton")
    assert second.code == 0, second.err
    assert "took big.bin from the local cache (256 KiB)" in second.err, second.err
    assert "fetched" not in second.err
    assert "received 0 B of 256 KiB; 256 KiB from the local cache" in second.out
    inline = installed("hydrate", "a.carton", "-o", "c.carton")  # already full
    assert inline.code == 0, inline.err
    assert "nothing to fetch: every file was inside the zip" in inline.out
    assert "0 B of 0 B" not in inline.out


def test_metrics_say_their_charset_once(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].count("charset") == 1
    assert response.headers["content-type"].startswith("text/plain; version=")


def test_login_to_a_registry_with_auth_off(installed, live_server):
    run = installed("login", "--url", live_server.url, "--token", "not-a-token")
    assert run.code == 1
    assert "has auth off" in run.error and "invalid or revoked" not in run.error
    assert not (installed.config / "carton-registry" / "credentials.json").exists()


def test_no_arguments_print_the_help(installed):
    run = installed()
    assert run.code == 0, run.err
    assert run.out.startswith("usage: carton-registry")
    assert "push" in run.out and "pull" in run.out and run.err == ""


# --- 10. one validator for self-test tensors -----------------------------------------------------

MISMATCHED_TOML = """spec_version = 1
model_name = 'mismatch'

[[input]]
name = 'x'
dtype = 'float64'
shape = [2]

[[self_test]]
[self_test.inputs]
x = '@tensor_data/s'

[runner]
runner_name = 'noop'
required_framework_version = '*'
"""

MISMATCHED_INDEX = """[[tensor]]
name = 's'
dtype = 'string'
shape = [2]
file = 's.toml'
inner = []
"""


def mismatched_carton(path: Path) -> Path:
    members = {
        "carton.toml": MISMATCHED_TOML.encode(),
        "tensor_data/index.toml": MISMATCHED_INDEX.encode(),
        "tensor_data/s.toml": b'data = ["a", "b"]\n',
    }
    manifest = "".join(
        f"{p}={hashlib.sha256(members[p]).hexdigest()}\n" for p in sorted(members)
    ).encode()
    path.write_bytes(zip_bytes({**members, "MANIFEST": manifest}))
    return path


def test_inspect_and_v2_self_tests_judge_a_self_test_tensor_alike(installed, live_server, tmp_path):
    carton = mismatched_carton(tmp_path / "m.carton")
    inspected = installed("inspect", str(carton))
    assert inspected.code == 0  # the format allows it (Carton's own reference cartons do it)
    report = json.loads(inspected.out)
    expected = "self_test[0].inputs: @tensor_data/s has dtype string but 'x' is declared float64"
    assert report["problems"] == [] and report["warnings"] == [expected]
    pushed = installed("push", str(carton), "--url", live_server.url)
    assert pushed.code == 0, pushed.err
    r = httpx.get(f"{live_server.url}/v2/models/mismatch/versions/1/self_tests/0")
    assert r.status_code == 400
    assert r.json()["error"] == expected


# --- 9. whoami, cache, pull REF FILE, push DIR ------------------------------------------------


def test_whoami_without_and_with_a_token(installed, live_server):
    anonymous = installed("whoami", "--url", live_server.url)
    assert anonymous.code == 0, anonymous.err
    assert f"registry  {live_server.url} (auth off)" in anonymous.out
    assert "token     none: anonymous" in anonymous.out
    as_json = json.loads(installed("whoami", "--url", live_server.url, "--json").out)
    assert as_json["auth"] == "off" and as_json["scopes"] == []


def test_cache_ls_and_prune(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    empty = json.loads(installed("cache", "ls", "--json").out)
    assert empty["chunks"] == 0 and empty["bytes"] == 0
    assert empty["path"] == str(installed.cache / "carton-registry" / "chunks")
    big = bytes(range(256)) * 2048
    sha = installed(
        "push", str(make_carton(tmp_path / "c.carton", "c", {"big.bin": big}))
    ).last_line
    assert installed("pull", sha, "--full").code == 0
    filled = json.loads(installed("cache", "ls", "--json").out)
    assert filled["chunks"] > 0 and filled["bytes"] > 0
    shown = installed("cache", "ls")
    assert "chunks     " in shown.out and "of at most 10.0 GiB" in shown.out
    kept = installed("cache", "prune")  # under the cap: nothing goes
    assert kept.code == 0 and kept.out.startswith("removed 0 chunk(s)")
    emptied = installed("cache", "prune", "--all")
    assert emptied.code == 0 and f"removed {filled['chunks']} chunk(s)" in emptied.out
    assert json.loads(installed("cache", "ls", "--json").out)["chunks"] == 0


def test_pull_one_file_of_a_carton(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    weights = bytes(range(256)) * 1024
    files = {"model/weights.bin": weights, "model/config.json": b'{"a": 1}\n'}
    sha = installed("push", str(make_carton(tmp_path / "c.carton", "one", files))).last_line
    run = installed("pull", "one:v1", "model/weights.bin")
    assert run.code == 0, run.err
    assert (installed.cwd / "weights.bin").read_bytes() == weights
    assert run.last_line == hashlib.sha256(weights).hexdigest()
    proc = subprocess.run(
        installed.command(("pull", sha, "model/config.json", "-o", "-")),
        cwd=installed.cwd,
        env=installed.env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == b'{"a": 1}\n'
    missing = installed("pull", "one", "config.json")
    assert missing.code == 1 and "did you mean model/config.json" in missing.error
    (installed.cwd / "config.json").write_text("mine")
    kept = installed("pull", "one", "model/config.json")
    assert kept.code == 1 and "--force" in kept.error
    assert (installed.cwd / "config.json").read_text() == "mine"


def test_push_a_folder_packs_it_deterministically(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    folder = installed.cwd / "my-model"
    (folder / "model").mkdir(parents=True)
    (folder / "carton.toml").write_text(CARTON_TOML.format(name="folded"))
    (folder / "tensor_data").mkdir()
    (folder / "tensor_data" / "index.toml").write_text("tensor = []\n")
    (folder / "model" / "w.bin").write_bytes(b"\x01" * 100_000)
    (folder / "model" / "b.txt").write_text("b\n")
    first = installed("push", "my-model")
    assert first.code == 0, first.err
    assert "packed my-model (4 files" in first.err
    again = installed("push", "my-model/")
    assert again.last_line == first.last_line and "nothing new" in again.out
    pulled = installed("pull", "folded", "--full", "-o", "full.carton")
    assert pulled.code == 0, pulled.err
    assert member_bytes(installed.cwd / "full.carton")["model/w.bin"] == b"\x01" * 100_000
    (folder / "MANIFEST").write_text("x")
    refused = installed("push", "my-model")
    assert refused.code == 1 and "MANIFEST: the packer writes it" in refused.error
    no_toml = installed.cwd / "empty"
    no_toml.mkdir()
    assert "no carton.toml" in installed("push", "empty").error


def test_packing_a_folder_gives_the_same_bytes_every_time(tmp_path):
    import io as _io

    from registry.carton.pack import pack_folder
    from registry.carton.zipread import CartonArchive

    folder = tmp_path / "m"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "carton.toml").write_text(CARTON_TOML.format(name="p"))
    (folder / "a" / "b" / "z.bin").write_bytes(b"z")
    (folder / "a" / "y.bin").write_bytes(b"y")
    outs = []
    for _ in range(2):
        out = _io.BytesIO()
        manifest = pack_folder(folder, out)
        outs.append(out.getvalue())
    assert outs[0] == outs[1]
    assert [e.path for e in manifest] == ["a/b/z.bin", "a/y.bin", "carton.toml"]
    packed = tmp_path / "p.carton"
    packed.write_bytes(outs[0])
    with CartonArchive.open(packed) as archive:
        assert archive.manifest_sha256 == manifest.sha256
        assert list(archive.members)[:2] == ["carton.toml", "MANIFEST"]


# --- 1. one byte form for a full carton ----------------------------------------------------------


def test_every_full_carton_of_a_manifest_is_the_same_file(installed, live_server, tmp_path):
    installed.env["REGISTRY_URL"] = live_server.url
    files = {
        "model/weights.bin": bytes(range(256)) * 4096,  # chunked and linked in the slim form
        "model/copy.bin": bytes(range(256)) * 4096,  # the same bytes at a second path
        "model/small.txt": b"inline\n",
        "model/empty": b"",
    }
    sha = installed("push", str(make_carton(tmp_path / "c.carton", "same", files))).last_line
    web = httpx.get(f"{live_server.url}/cartons/{sha}.carton", params={"form": "full"})
    assert web.headers["etag"] == f'"{sha}-full-v1"'
    runs = {
        "cached.carton": ("pull", sha, "--full", "-o", "cached.carton"),
        "again.carton": ("pull", sha, "--full", "-o", "again.carton"),  # warm cache
        "direct.carton": ("pull", sha, "--full", "--no-cache", "-o", "direct.carton"),
    }
    for name, argv in runs.items():
        run = installed(*argv)
        assert run.code == 0, (name, run.err)
        assert (installed.cwd / name).read_bytes() == web.content, name
    assert installed("pull", sha, "-o", "slim.carton").code == 0
    for extra in ((), ("--no-cache",)):
        hydrated = installed("hydrate", "slim.carton", "-o", "h.carton", "--force", *extra)
        assert hydrated.code == 0, hydrated.err
        assert (installed.cwd / "h.carton").read_bytes() == web.content
    # the same carton again over a file that holds it: kept, no --force needed
    assert installed("pull", sha, "--full", "-o", "cached.carton").code == 0
