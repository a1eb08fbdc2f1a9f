"""The installed ``carton-registry``, as a new user meets it (issue 15).

Every test runs the script in a subprocess from a folder outside the checkout, with
a clean environment (``installed``), and every run is checked for tracebacks.
"""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import subprocess
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from registry.cli import build_parser
from registry.db.engine import make_engine
from registry.db.migrate import upgrade
from registry.db.tables import Carton
from tests.conftest import fixture_carton
from tests.integration.cli.conftest import (
    assert_no_traceback,
    make_carton,
    manifest_hash,
    relinked,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def backend() -> str:
    """The command line is the subject here, not the storage: one backend pair is enough."""
    return "sqlite-fs"


def storage_env(live_server) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """REGISTRY_* naming the live server's storage, as an operator would set them."""
    s = live_server.ctx.settings
    return {
        "REGISTRY_DATA_DIR": str(s.data_dir),
        "REGISTRY_DATABASE_URL": s.database_url,
        "REGISTRY_BLOB_STORE": s.blob_store,
    }


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- a first session ----------------------------------------------------------------------


def test_first_session_from_an_empty_registry_to_a_model_loaded_by_url(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    carton = fixture_carton("02")
    name = "selftest_identity"

    empty = installed("ls", env=url)
    assert empty.code == 0 and empty.out == "" and "no models yet" in empty.err

    pushed = installed("push", str(carton), "--tag", "prod", env=url)
    assert pushed.code == 0, pushed.err
    sha = pushed.last_line
    assert sha == manifest_hash(carton)

    listing = installed("ls", env=url)
    assert listing.code == 0 and name in listing.out and "v1" in listing.out

    info = installed("info", f"{name}@prod", env=url)
    assert info.code == 0, info.err
    assert sha in info.out and name in info.out
    load_url = f"{live_server.url}/cartons/{sha}.carton"
    assert load_url in info.out

    pulled = installed("pull", f"{name}@prod", env=url)
    assert pulled.code == 0, pulled.err
    slim = installed.cwd / f"{name}-{sha[:12]}.carton"
    assert manifest_hash(slim) == sha
    hydrated = installed("hydrate", slim.name, "-o", "full.carton", env=url)
    assert hydrated.code == 0 and hydrated.last_line == sha

    # what the loader does with the URL info printed
    response = httpx.get(load_url)
    assert response.status_code == 200
    assert zipfile.ZipFile(io.BytesIO(response.content)).read("MANIFEST")


# --- operator commands --------------------------------------------------------------------


OPERATOR_COMMANDS = [("gc",), ("fsck",), ("token", "list"), ("token", "create", "--scope", "push")]


@pytest.mark.parametrize("command", OPERATOR_COMMANDS, ids=" ".join)
def test_operator_commands_refuse_a_missing_database_and_create_nothing(installed, command):
    run = installed(*command)
    assert run.code == 2
    expected = f"sqlite:///{installed.cwd.resolve() / 'data' / 'registry.db'}"
    assert run.error.startswith(f"error: database {expected} does not exist")
    assert "REGISTRY_DATABASE_URL" in run.error
    assert run.out == ""
    assert files_in(installed.cwd) == []


def test_operator_commands_refuse_an_unmigrated_database(installed, tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    run = installed("gc", env={"REGISTRY_DATABASE_URL": f"sqlite:///{empty}"})
    assert run.code == 2
    assert "holds no registry tables" in run.error and "db upgrade" in run.error

    old = tmp_path / "old.db"
    engine = make_engine(f"sqlite:///{old}")
    upgrade(engine, "0001")
    engine.dispose()
    run = installed("fsck", env={"REGISTRY_DATABASE_URL": f"sqlite:///{old}"})
    assert run.code == 2
    assert "is at revision 0001" in run.error and "carton-registry db upgrade" in run.error

    unreachable = "postgresql://registry:s3cret@127.0.0.1:9/registry"
    run = installed("token", "list", env={"REGISTRY_DATABASE_URL": unreachable})
    assert run.code == 2
    assert "postgresql://registry:***@127.0.0.1:9/registry" in run.error
    assert "s3cret" not in run.err
    assert files_in(installed.cwd) == []


def test_operator_commands_say_which_storage_they_act_on(installed, live_server):
    env = storage_env(live_server)
    named = f"database {env['REGISTRY_DATABASE_URL']}, blob store {env['REGISTRY_BLOB_STORE']}"
    for command in (("gc", "--dry-run"), ("fsck",), ("token", "list")):
        run = installed(*command, env=env)
        assert run.code == 0, run.err
        assert run.err.splitlines()[0] == named
    created = installed("token", "create", "--scope", "push", env=env)
    assert created.code == 0, created.err
    assert created.last_line.startswith("crt_") and created.last_line not in created.err
    assert files_in(installed.cwd) == []

    for command in ("gc", "fsck", "token"):
        text = " ".join(installed(command, "--help").out.split())
        assert "REGISTRY_DATABASE_URL" in text and "REGISTRY_BLOB_STORE" in text
        assert "REGISTRY_URL and --url play no part" in text


# --- push verifies what it reads ------------------------------------------------------------


def stale_copy(good: Path, dest: Path, member: str, data: bytes) -> Path:
    """``good`` with one member's bytes replaced, its MANIFEST unchanged."""
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members[member] = data
    with zipfile.ZipFile(dest, "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    return dest


def test_push_of_a_file_that_no_longer_matches_its_manifest(installed, live_server, tmp_path):
    url = {"REGISTRY_URL": live_server.url}
    files = {"model/w.bin": b"A" * 4096, "model/x.bin": b"B" * 10}
    good = make_carton(tmp_path / "good.carton", "stale", files)
    stale = stale_copy(good, tmp_path / "stale.carton", "model/w.bin", b"C" * 4096)

    for registry_has_it in (False, True):
        run = installed("push", str(stale), env=url)
        assert run.code == 1, run.out
        assert run.error.startswith(f"error: {stale}: model/w.bin: content hashes to ")
        assert "but MANIFEST says" in run.error and "nothing new" not in run.out
        if not registry_has_it:
            assert installed("push", str(good), env=url).code == 0

    whole = installed("push", "--full", str(stale), env=url)
    assert whole.code == 1
    assert whole.error == run.error + " (HTTP 400)"  # the server's verdict, word for word
    versions = installed("versions", "stale", "--json", env=url)
    assert [v["version"] for v in json.loads(versions.out)] == [1]


def test_empty_truncated_and_non_zip_files_are_told_apart(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    data = fixture_carton("02").read_bytes()
    cases = {
        "empty.carton": (b"", "not a zip archive: empty (0 bytes)"),
        "cut.carton": (data[: len(data) // 2], "truncated zip archive"),
        "text.carton": (b"hello\n" * 100, "not a zip archive (no end of central directory"),
    }
    for name, (content, message) in cases.items():
        (installed.cwd / name).write_bytes(content)
        run = installed("push", name, env=url)
        assert run.code == 1
        assert run.error.startswith(f"error: {name}: {message}"), run.err
        assert "(HTTP" not in run.err  # refused locally, nothing was sent (issue 26)
        inspected = installed("inspect", name)
        assert inspected.code == 1
        assert json.loads(inspected.out)["problems"][0].startswith(message)


# --- no traceback, whatever happens ---------------------------------------------------------


@pytest.mark.parametrize(
    ("registry_url", "message"),
    [
        ("http://127.0.0.1:9", "cannot connect to the registry at http://127.0.0.1:9"),
        ("localhost:8080", "invalid registry URL 'localhost:8080'"),
        ("ftp://example.org", "invalid registry URL"),
        ("http://[::1", "invalid registry URL"),
        ("http://127.0.0.1:99999", "invalid registry URL"),
    ],
)
def test_unreachable_or_invalid_registry_urls(installed, registry_url, message):
    (installed.cwd / "m.carton").write_bytes(fixture_carton("01").read_bytes())
    usage = "invalid" in message  # a URL that cannot name a registry is a usage error (2)
    for command in (("ls",), ("pull", "m"), ("push", "m.carton"), ("info", "m")):
        run = installed(*command, env={"REGISTRY_URL": registry_url})
        assert run.code == (2 if usage else 1), (command, run.err)
        assert message in run.error, command
    assert files_in(installed.cwd) == ["m.carton"]


def test_bad_references(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    assert installed("push", str(fixture_carton("02")), env=url).code == 0
    cases = {
        "": "empty reference",
        "a/b": "no model named 'a/b'",
        "selftest_identity:7": "has no version 7",
        "selftest_identity@nope": "has no tag 'nope'",
        "sha256:xyz": "invalid manifest hash 'sha256:xyz'",
        "sha256:abc": "at least 8",
        "0123abcd": "no model named '0123abcd', and no manifest hash starts with 0123abcd",
    }
    for ref, message in cases.items():
        for verb in ("pull", "info"):
            run = installed(verb, ref, env=url)
            assert run.code == 1, (verb, ref)
            assert message in run.error, (verb, ref)
    assert files_in(installed.cwd) == []


def closed_pipe_run(installed, *args: str) -> subprocess.CompletedProcess[bytes]:  # type: ignore[no-untyped-def]
    """Run with stdout a pipe whose reader is gone (``carton-registry ... | head -0``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            installed.command(args),
            cwd=installed.cwd,
            env=installed.env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)


def test_a_closed_stdout_is_no_error(installed, live_server):
    installed.env["REGISTRY_URL"] = live_server.url
    assert installed("push", str(fixture_carton("02"))).code == 0
    for args in (
        ("info", "selftest_identity"),
        ("ls",),
        ("versions", "selftest_identity"),
        ("--help",),
    ):
        run = closed_pipe_run(installed, *args)
        assert run.returncode == 141, (args, run.stderr)
        assert run.stderr == b"", (args, run.stderr)


def interrupt_when(proc: subprocess.Popen[str], ready, timeout: float = 30) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Send SIGINT (Ctrl-C) to ``proc`` once ``ready()``; its stdout and stderr."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the transfer never started"
        time.sleep(0.02)
    time.sleep(0.2)  # well into the transfer
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=30)


def test_ctrl_c_during_pull_leaves_no_partial_file(installed, drip_server):
    sha = "ab" * 32
    out = installed.cwd / "downloads"
    out.mkdir()
    proc = installed.start("pull", sha, "-o", "downloads/model.carton", "--url", drip_server.url)
    _, err = interrupt_when(proc, lambda: any(out.iterdir()))
    assert proc.returncode == 130
    assert err == "interrupted\n"
    assert files_in(out) == []


def test_ctrl_c_during_hydrate_leaves_no_partial_file(installed, drip_server, tmp_path):
    slim = tmp_path / "slim.carton"
    relinked(fixture_carton("05"), slim, lambda sha: [f"{drip_server.url}/blobs/{sha}"])
    out = installed.cwd / "full"
    out.mkdir()
    proc = installed.start("hydrate", str(slim), "-o", "full/model.carton")
    _, err = interrupt_when(proc, lambda: any(out.iterdir()))
    assert proc.returncode == 130
    assert_no_traceback(err)
    assert err == "interrupted\n"
    assert files_in(out) == []


# --- files pull and hydrate write ---------------------------------------------------------


def test_written_files_follow_the_umask_and_the_web_download_name(installed, live_server, tmp_path):
    url = {"REGISTRY_URL": live_server.url}
    carton = make_carton(tmp_path / "c.carton", "my model", {"w": b"weights"})
    pushed = installed("push", str(carton), env=url)
    assert pushed.code == 0, pushed.err
    sha = pushed.last_line
    umask = {"preexec_fn": lambda: os.umask(0o002)}
    for extra in ((), ("--full",)):
        run = installed("pull", "my model", *extra, env=url, **umask)
        assert run.code == 0, run.err
        head = httpx.head(
            f"{live_server.url}/cartons/{sha}.carton", params=extra and {"form": "full"}
        )
        web_name = head.headers["content-disposition"].split('filename="')[1].rstrip('"')
        assert web_name == f"my_model-{sha[:12]}{'-full' if extra else ''}.carton"
        assert f"wrote {web_name} " in run.out
        written = installed.cwd / web_name
        assert stat.S_IMODE(written.stat().st_mode) == 0o664
    hydrated = installed(
        "hydrate", f"my_model-{sha[:12]}.carton", "-o", "h.carton", env=url, **umask
    )
    assert hydrated.code == 0, hydrated.err
    assert stat.S_IMODE((installed.cwd / "h.carton").stat().st_mode) == 0o664
    assert " " not in "".join(files_in(installed.cwd))


# --- references -----------------------------------------------------------------------------


def test_hash_prefixes_and_digest_references_work_wherever_a_reference_does(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    sha = installed("push", str(fixture_carton("02")), env=url).last_line
    name = "selftest_identity"
    for ref in (sha[:8], sha[:20], f"sha256:{sha}", f"sha256:{sha[:10]}"):
        info = installed("info", ref, "--json", env=url)
        assert info.code == 0, (ref, info.err)
        assert json.loads(info.out)["manifest_sha256"] == sha
        pulled = installed("pull", ref, "-o", "p.carton", env=url)
        assert pulled.code == 0 and pulled.last_line == sha
    tagged = installed("tag", sha[:8], "stable", env=url)
    assert tagged.code == 0, tagged.err
    assert f"tagged {name}@stable: version 1" in tagged.out

    too_short = installed("info", f"sha256:{sha[:7]}", env=url)
    assert too_short.code == 1 and "at least 8" in too_short.error

    # two cartons sharing the first 8 digits, as happens among millions
    with live_server.ctx.transaction() as session:
        for tail in ("0" * 56, "1" * 56):
            session.add(
                Carton(
                    manifest_sha256="abcdef01" + tail,
                    manifest=b"",
                    carton_toml="spec_version = 1\n",
                    spec_version=1,
                    file_count=0,
                    total_bytes=0,
                )
            )
    ambiguous = installed("info", "abcdef01", env=url)
    assert ambiguous.code == 1
    assert "matches several cartons" in ambiguous.error and "(HTTP 409)" in ambiguous.error
    response = httpx.get(f"{live_server.url}/api/v1/cartons/abcdef01")
    assert response.status_code == 409 and "give more digits" in response.json()["error"]
    assert httpx.get(f"{live_server.url}/api/v1/cartons/abcdef02").status_code == 404
    assert httpx.get(f"{live_server.url}/api/v1/cartons/abcdef0").status_code == 400


# --- verbs for what needed curl ---------------------------------------------------------------


def test_tag_untag_rm_versions_and_tags(installed, live_server, tmp_path):
    url = {"REGISTRY_URL": live_server.url}
    shas = [
        installed(
            "push", str(make_carton(tmp_path / f"{i}.carton", "m", {"w": bytes([i])})), env=url
        ).last_line
        for i in (1, 2, 3)
    ]
    assert installed("tag", "m:1", "prod", env=url).last_line == shas[0]
    # compare-and-swap: moves only from where the caller saw it
    lost = installed("tag", "m:3", "prod", "--if-match", "m:2", env=url)
    assert lost.code == 1 and "(HTTP 412)" in lost.error
    won = installed("tag", "m:2", "prod", "--if-match", shas[0][:8], env=url)
    assert won.code == 0 and won.last_line == shas[1]
    assert installed("tag", "m:3", "canary", env=url).code == 0

    tags = installed("tags", "m", env=url)
    assert tags.code == 0
    assert tags.out.splitlines()[0].split() == ["TAG", "VERSION", "MANIFEST"]
    assert "prod" in tags.out and shas[1] in tags.out
    assert json.loads(installed("tags", "m", "--json", env=url).out)["prod"]["version"] == 2

    untagged = installed("untag", "m@canary", env=url)
    assert untagged.code == 0 and "untagged m@canary" in untagged.out
    assert "canary" not in installed("tags", "m", env=url).out
    assert installed("untag", "m:3", env=url).code == 2  # not NAME@TAG

    removed = installed("rm", "m:1", "m:3", env=url)
    assert removed.code == 0, removed.err
    assert f"removed m version 1 (manifest {shas[0]})" in removed.out
    assert installed("rm", "m", env=url).code == 2  # never a guess at which version
    assert httpx.get(f"{live_server.url}/models/m/versions/1.carton").status_code == 404

    versions = installed("versions", "m", env=url)
    assert versions.code == 0
    assert versions.out.splitlines()[0].split()[:3] == ["VERSION", "MANIFEST", "TAGS"]
    assert [
        v["version"] for v in json.loads(installed("versions", "m", "--json", env=url).out)
    ] == [2]


# --- login ----------------------------------------------------------------------------------


@pytest.mark.settings(auth="write")
def test_login_saves_a_token_per_registry_and_the_environment_wins(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    token = installed("token", "create", "--scope", "push", env=storage_env(live_server)).last_line
    carton = str(fixture_carton("02"))

    anonymous = installed("push", carton, env=url)
    assert anonymous.code == 1 and "(HTTP 401)" in anonymous.error
    assert "carton-registry login" in anonymous.error

    refused = installed("login", "--token", "crt_not-a-real-token", env=url)
    assert refused.code == 1 and "refuses this token" in refused.error
    assert not installed.config.exists()

    login = installed("login", "--token-stdin", input=token + "\n", env=url)
    assert login.code == 0, login.err
    assert "scopes: pull, push" in login.out and token not in login.out + login.err
    saved = installed.config / "carton-registry" / "credentials.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert installed("push", carton, env=url).code == 0

    # the token is the registry URL's, however it is spelled
    spelled = {"REGISTRY_URL": live_server.url.replace("http://", "HTTP://") + "/"}
    assert installed("push", carton, "--tag", "t", env=spelled).code == 0

    env_wins = installed("push", carton, env={**url, "REGISTRY_TOKEN": "crt_wrong"})
    assert env_wins.code == 1 and "the token came from REGISTRY_TOKEN" in env_wins.error

    assert "logged out" in installed("logout", env=url).out
    assert installed("push", carton, env=url).code == 1
    assert "not logged in" in installed("logout", env=url).out
    no_token = installed("login", env=url)
    assert no_token.code == 2 and "--token-stdin" in no_token.error


# --- output for people and for scripts --------------------------------------------------------


def test_tables_by_default_and_json_for_scripts(installed, live_server):
    url = {"REGISTRY_URL": live_server.url}
    for prefix in ("02", "03"):
        assert installed("push", str(fixture_carton(prefix)), env=url).code == 0
    sha = manifest_hash(fixture_carton("02"))
    for args in (("ls",), ("info", "selftest_identity"), ("versions", "selftest_identity")):
        table = installed(*args, env=url)
        assert table.code == 0, table.err
        with pytest.raises(json.JSONDecodeError):
            json.loads(table.out)
        assert "KiB" in table.out and ("ago" in table.out or "just now" in table.out), args
        assert json.loads(installed(*args, "--json", env=url).out)
    ls = installed("ls", env=url).out
    assert "selftest_identity" in ls and "misc_and_strings" in ls
    info = installed("info", "selftest_identity", env=url).out
    assert sha in info and "selftest_identity" in info and "float32" in info
    data = json.loads(installed("info", "selftest_identity", "--json", env=url).out)
    assert data["manifest_sha256"] == sha and data["model"]["name"] == "selftest_identity"


# --- help -----------------------------------------------------------------------------------


def all_parsers(parser, path=()):  # type: ignore[no-untyped-def]
    yield path, parser
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield from all_parsers(sub, (*path, name))


def test_every_command_and_option_explains_itself(installed):
    for path, parser in all_parsers(build_parser()):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for choice in action._choices_actions:
                    assert choice.help, (path, choice.dest)
            else:
                assert action.help, (path, action.option_strings or action.dest)
        shown = installed(*path, "--help")
        assert shown.code == 0 and shown.out.startswith("usage: carton-registry"), path
