"""Client commands start fast: building the parser loads no server code."""

from __future__ import annotations

import subprocess
import sys

import pytest

SERVER_LIBRARIES = {"sqlalchemy", "litestar", "uvicorn", "boto3", "numpy", "alembic"}
OUR_SERVER_SIDE = {"registry.services", "registry.http", "registry.db"}


def _modules_after(argv: list[str], status: int = 0) -> set[str]:
    """The modules a fresh interpreter holds after ``main(argv)`` returned ``status``."""
    code = (
        "import contextlib, io, sys\n"
        "from registry.cli import main\n"
        "quiet = io.StringIO()\n"
        "with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        f"    assert main({argv!r}) == {status}\n"
        "print('\\n'.join(sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(run.stdout.split())


def test_help_loads_no_server_code():
    loaded = _modules_after(["--help"])
    assert not {m.split(".")[0] for m in loaded} & SERVER_LIBRARIES
    assert not {".".join(m.split(".")[:2]) for m in loaded} & OUR_SERVER_SIDE


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"], ["gc", "--help"]])
def test_commands_that_talk_to_no_registry_do_not_load_httpx(argv):
    """httpx (12 MiB, a sixth of a command's start) is loaded by the commands that send
    requests; ``serve``'s supervisor process, for one, holds none of it."""
    loaded = _modules_after(argv)
    assert "registry.cli" in loaded  # the check can fail
    assert "httpx" not in loaded and "registry.client.transport" not in loaded


def test_the_script_does_not_load_httpxs_own_command_line_client():
    """``carton-registry`` (registry.script) keeps httpx from importing click, pygments
    and rich's syntax highlighting for a command-line client it never runs."""
    code = (
        "import contextlib, io, sys\n"
        "sys.argv = ['carton-registry', '--help']\n"
        "from registry.script import run_command\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    run_command()\n"
        "import httpx\n"
        "print(sys.modules.get('httpx._main'), 'click' in sys.modules, callable(httpx.main))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["None", "False", "True"]


def test_python_dash_m_runs_as_the_script_does():
    """``python -m registry.cli`` starts as ``carton-registry`` does: through
    ``registry.script``, so httpx loads without its command-line client there too."""
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print(sys.modules.get('httpx._main', 'absent')))\n"
        "sys.argv = ['registry.cli', '--help']\n"
        "runpy.run_module('registry.cli', run_name='__main__')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split()[-1] == "None"  # "absent" when registry.script did not run


_SWALLOWED = (
    "import sys, time, weakref\n"
    "from registry.script import interrupt_again\n"
    "sys.unraisablehook = interrupt_again\n"
    "class Held: pass\n"
    "held = Held()\n"
    "def callback(_):\n"
    "    raise {error}\n"  # Python cannot raise from a weakref callback: it is 'ignored'
    "ref = weakref.ref(held, callback)\n"
    "try:\n"
    "    del held\n"
    "    time.sleep(1)\n"
    "    print('went on')\n"
    "except KeyboardInterrupt:\n"
    "    print('interrupted')\n"
)


def test_a_ctrl_c_swallowed_by_a_callback_still_stops_the_command():
    """Python prints an interrupt raised in a callback (as in the import system's module
    locks, while a module loads) as "Exception ignored" and goes on; the script's hook
    delivers it again, so the command stops with one line, as for any Ctrl-C."""
    code = _SWALLOWED.format(error="KeyboardInterrupt")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["interrupted"]
    assert run.stderr == ""


def test_other_errors_in_callbacks_are_reported_as_python_reports_them():
    code = _SWALLOWED.format(error="ValueError('odd')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["went", "on"]
    assert "Exception ignored" in run.stderr and "ValueError: odd" in run.stderr


def _commands(parser) -> dict[str, object]:  # type: ignore[no-untyped-def]
    (sub,) = (a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(sub.choices)


def test_each_command_is_built_by_the_group_the_table_names():
    """``COMMANDS`` says which module adds each command: building one command's group
    yields exactly the commands the table gives that module, and every command of the
    whole parser is in the table (a new command missing from it would fall back to the
    whole parser, slowly; one named wrongly would be unknown)."""
    from registry.cli import COMMANDS, GROUPS, build_parser

    every = _commands(build_parser())
    assert set(every) == set(COMMANDS)
    assert set(COMMANDS.values()) == {module for module, _ in GROUPS}
    for command, module in COMMANDS.items():
        built = _commands(build_parser(command=command))
        assert set(built) == {name for name, group in COMMANDS.items() if group == module}


def test_a_command_built_alone_reads_and_explains_itself_as_in_the_whole_parser():
    from registry.cli import COMMANDS, build_parser

    every = _commands(build_parser())
    for command in COMMANDS:
        alone = _commands(build_parser(command=command))[command]
        assert alone.format_help() == every[command].format_help(), command  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["push", "m.carton"], "push"),
        (["--url", "http://r:8080", "--token", "t", "pull", "x"], "pull"),
        (["--url=http://r:8080", "ls"], "ls"),
        (["--token"], None),
        (["--version"], None),
        (["-h", "push"], None),
        ([], None),
        (["pussh", "m.carton"], "pussh"),
    ],
)
def test_the_command_is_the_first_word_past_the_global_options(argv, command):
    from registry.cli import command_in

    assert command_in(argv) == command


def test_a_push_starts_without_the_other_commands_or_the_chunker():
    """A push builds its own group of commands only: the server's and operators'
    modules (with the worker's setup and logging handlers) are not imported, nor is the
    FastCDC chunker while nothing is cut (a re-push)."""
    loaded = _modules_after(["push", "no-such.carton"], status=1)
    assert "registry.cli.client_commands" in loaded  # the check can fail
    unwanted = {
        "registry.cli.server_commands",
        "registry.cli.operator_commands",
        "registry.cli.settings_command",
        "registry.worker",
        "registry.settings",  # a push reads no REGISTRY_* but its URL and token
        "pyfastcdc",
    }
    assert not loaded & unwanted


def test_an_unknown_command_is_refused_with_the_whole_list(capsys):
    from registry.cli import main

    assert main(["pussh", "m.carton"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'pussh'" in err and "'push'" in err and "'serve'" in err


_EXIT_NOW = (
    "import atexit, sys, threading\n"
    "from registry.script import exit_now\n"
    "class Held:\n"
    "    def __del__(self):\n"
    "        print('teardown', flush=True)\n"
    "held = Held()\n"
    "atexit.register(lambda: sys.stdout.write('atexit ran;'))\n"
    "sys.stdout.write('output;')\n"  # still in the buffer: stdout is a pipe
    "{before}"
    "exit_now(3)\n"
    "print('returned', end=';')\n"
    "{after}"
)


def test_the_script_ends_without_the_interpreters_teardown():
    """Output still buffered and atexit functions survive; the teardown (that would collect
    ``held``) is skipped, and the status is the command's."""
    code = _EXIT_NOW.format(before="", after="")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 3
    assert run.stdout == "output;atexit ran;"


def test_the_script_exits_as_usual_while_another_thread_runs():
    code = _EXIT_NOW.format(
        before="go = threading.Event()\nthreading.Thread(target=go.wait).start()\n",
        after="go.set()\n",
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    assert run.stdout.startswith("output;returned;")  # then the usual exit: atexit, teardown
    assert "atexit ran;" in run.stdout and "teardown" in run.stdout
