"""The `lakesink` command: the parser, the dispatch and the error handling.

Each subcommand lives in its own module (``check``, ``sink``, ``vacuum``, ``restore``, ``demo``, ``dev``, ...:
:data:`COMMANDS`) with an ``add_parser(sub)`` that registers it, imported only when argv names it (all of them
for ``--help``); its handler ``func(args, output)`` RETURNS its result (a dataclass
from :mod:`lakesink.cli.output`, or an int exit status) and the :class:`~lakesink.cli.output.Output`
chosen by the global ``--format`` renders it. Subcommands import their heavy modules (pyspark, boto3)
lazily, so ``check`` and ``--help`` stay fast.

Errors: a :class:`lakesink.errors.LakesinkError` prints ``lakesink: error: <message>`` on stderr and
exits with the error's ``exit_code`` (:data:`lakesink.errors.EXIT_CODES`: 3 config, 4 fenced by a concurrent
run, 5 a dependency unreachable, 6 a bad record, 2 bad usage, 1 otherwise); any other exception prints ``lakesink: internal error: <type>: <message> (run with --debug for
the traceback)`` and exits 1. ``--debug`` adds the traceback (and DEBUG logging of ``lakesink.*``).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from lakesink.cli.output import FORMATS, Output, make_output, resolved_masked
from lakesink.runtime.logs import run_log_file, set_verbose

#: The subcommands, in ``--help`` order: each is the module ``lakesink.cli.<name>`` with an ``add_parser(sub)``,
#: imported only when its parser is built (every command's modules cost ~0.1 s a process; ``lakesink sql`` runs
#: in about a second).
COMMANDS = ("sink", "vacuum", "restore", "manifest", "check", "demo", "dev", "schema", "sql", "status", "validate",
            "verify", "setup", "expire", "erase")


def command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word naming one (before it come only the global options, and
    ``--format``'s values are no command's name); None for ``--help``, ``--version`` or an unknown command."""
    return next((a for a in argv if a in COMMANDS), None)


def version() -> str:
    """The installed distribution's version (what pip installed), else the package's own."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("lakesink")
    except PackageNotFoundError:  # a checkout on sys.path, not installed
        from lakesink import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version`` as argparse's ``action="version"`` prints it, the version looked up only when asked
    (importlib.metadata costs about 40 ms, every command)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from lakesink.objects.formats.native import describe

        print(f"lakesink {version()}; {describe()}", file=sys.stdout, flush=True)
        parser.exit()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``lakesink`` parser; given the ``argv`` it will parse, with only the subcommand that names (every
    subcommand when none does: ``--help`` and an unknown command's error list them all)."""
    import importlib

    from lakesink.errors import EXIT_CODES

    parser = argparse.ArgumentParser(
        prog="lakesink",
        description="Archive Kafka topics to S3 with Confluent S3-sink naming and a Delta manifest.",
        epilog="exit status: " + "; ".join(f"{code} {what}" for code, what in EXIT_CODES.items()),
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="print lakesink's version (and whether its native kernels are installed) and exit")
    parser.add_argument("--format", choices=sorted(FORMATS), default="text",
                        help="how results are printed: text for people (default) or json (one JSON "
                             "document per result, one per line)")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of errors and log lakesink.* at DEBUG level (implies --verbose)")
    parser.add_argument("--verbose", action="store_true",
                        help="let Spark and local workers log to the terminal (by default their log goes to a file named in "
                             "errors)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # the global options are also accepted after the subcommand (`lakesink sink --format json ...`)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--format", choices=sorted(FORMATS), default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    add_parser = sub.add_parser

    def add_with_common(name, **kw):
        return add_parser(name, parents=[*kw.pop("parents", []), common], **kw)
    sub.add_parser = add_with_common
    only = command_in(argv) if argv is not None else None
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"lakesink.cli.{name}").add_parser(sub)
    return parser


def _exit_code(result) -> int:
    if isinstance(result, bool):
        return 0
    if isinstance(result, int):
        return result
    return int(getattr(result, "exit_code", 0) or 0)


def _enable_debug_logging() -> None:
    log = logging.getLogger("lakesink")
    log.setLevel(logging.DEBUG)
    if not log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(h)


def _fail(output: Output, ex: BaseException, debug: bool, internal: bool) -> int:
    if debug:
        traceback.print_exc(file=sys.stderr)
    if internal:
        msg = f"lakesink: internal error: {type(ex).__name__}: {ex}"
        if not debug:
            msg += " (run with --debug for the traceback)"
    else:
        msg = f"lakesink: error: {ex}"
    msg = resolved_masked(msg)
    log = run_log_file()
    if log and os.path.exists(log) and os.path.getsize(log) > 0:
        msg += f" (log: {log})"
    print(msg, file=sys.stderr, flush=True)
    try:
        output.exception(ex, internal=internal)
    except BrokenPipeError:
        _silence_stdout()
    # an error may ask for another status (ArchiveQueryError: 2, bad usage, like argparse's)
    return 1 if internal else int(getattr(ex, "exit_code", 1) or 1)


def _silence_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so the interpreter's final flush does not fail too."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from lakesink.errors import LakesinkError

    output = make_output(args.format)
    if args.debug:
        _enable_debug_logging()
    set_verbose(args.debug or args.verbose)
    from lakesink.runtime.client_logs import route_client_logs

    route_client_logs(args.debug or args.verbose)  # librdkafka's lines: the run's log file, or stderr if verbose
    try:
        result = args.func(args, output)
        if not isinstance(result, int):
            output.render(result)
        return _exit_code(result)
    except LakesinkError as e:
        if str(e).startswith("lakesink needs ") and args.command:  # NotInstalledError: name the command that needs it
            command = " ".join(filter(None, (args.command, getattr(args, "dev_command", None))))
            e = type(e)(f"{command} needs {str(e)[len('lakesink needs '):]}")
        return _fail(output, e, args.debug, internal=False)
    except KeyboardInterrupt:
        print("lakesink: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `lakesink ... | head`: the reader left; say nothing more on stdout
        _silence_stdout()
        return 1
    except Exception as e:  # noqa: BLE001 -- the one place that turns any bug into a one-line message
        return _fail(output, e, args.debug, internal=True)


if __name__ == "__main__":
    sys.exit(main())
