"""The ``carton-registry`` script's entry point: what has to happen before ``registry.cli``
(and with it httpx) is imported, so it lives outside that package."""

from __future__ import annotations

import _thread
import sys
import time

INTERRUPTED = 130  # as registry.cli reports a Ctrl-C (128 + SIGINT)
REDELIVER_AFTER = 0.005  # seconds: long enough for the callback that swallowed it to end
_MAIN_THREAD = _thread.get_ident()  # the script imports this module on its main thread


def interrupt_again(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a Ctrl-C that lands in a callback Python cannot raise from
    (the import system's module-lock weakref callbacks, while a module loads) would be
    printed as "Exception ignored ... KeyboardInterrupt" with a traceback, and lost: the
    command would go on. Deliver it to the main thread again a moment later, from another
    thread (delivered now, it would land in this hook, which cannot raise either), where
    it stops the command with one line; anything else goes to Python's own hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _thread.start_new_thread(_interrupt_soon, ())
        return
    sys.__unraisablehook__(unraisable)


def _interrupt_soon() -> None:
    import signal  # here, not at the top: every command's start imports this module

    time.sleep(REDELIVER_AFTER)
    if sys.unraisablehook is not interrupt_again:  # the command has ended meanwhile
        return
    # A real SIGINT to the main thread (not ``_thread.interrupt_main``): it also breaks off
    # a blocking call there, a download's read, as the user's own Ctrl-C does.
    signal.pthread_kill(_MAIN_THREAD, signal.SIGINT)


def main() -> int:
    """The console script: run the command, then end the process without the interpreter's
    teardown (``exit_now``); the status is returned only when that was not safe."""
    code = run_command()
    exit_now(code)
    return code


def run_command() -> int:
    """The command's exit status, the process left running: for callers in the same process
    (tests), and what ``main`` runs."""
    previous, sys.unraisablehook = sys.unraisablehook, interrupt_again
    try:
        return _load_and_run()
    finally:
        sys.unraisablehook = previous  # for a caller in the same process (tests)


def exit_now(code: int) -> None:
    """End the process with ``code`` now, when no other thread runs (else return).

    The interpreter's teardown frees every module and object one by one: for a re-push,
    whose command is done in a few milliseconds once its 320 modules are loaded, that was
    20 ms of its 0.14 s of CPU (0.13 -> 0.11 s with os._exit, median of 25 runs). What
    of the teardown matters runs first: atexit functions (logging's flush, weakref
    finalizers such as a temporary folder's cleanup), then stdout and stderr are flushed.
    Every file the commands write is closed by then (``with`` blocks, atomic renames).
    """
    import threading

    if threading.active_count() > 1:  # a thread still at work: let the normal exit wait
        return
    import atexit
    import os

    try:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:  # e.g. stdout closed early: the normal exit reports it as usual
        return
    os._exit(code)


def _load_and_run() -> int:
    try:
        # httpx imports its own command-line client (click, pygments, rich's syntax
        # highlighting) whenever those are installed, as they are beside the registry
        # (uvicorn and rich bring them): a sixth of every command's start, for a client
        # we never run. A None entry makes that import fail, which httpx expects.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: see above
        from registry.cli import main as run
    except KeyboardInterrupt:  # Ctrl-C while the command line loads: nothing started yet
        sys.stderr.write("interrupted\n")
        return INTERRUPTED
    return run()
