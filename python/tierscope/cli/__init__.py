"""The `tierscope` command: one module per subcommand, each with `register(subparsers)`
adding its parser and setting `func(args) -> exit status`.

Exit status: 0 success, 1 a run failed, 2 bad input (one line on stderr naming the file,
line and field; no traceback), an output that may not be written (not tierscope's, in use
by another tierscope, or refused by the system: one line, `tierscope.outdir`) or an engine
this host cannot run (the kvm engine without /dev/kvm: one line naming the reason), 130
interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence

from tierscope.cli import compare as compare_cmd
from tierscope.cli import measure as measure_cmd
from tierscope.cli import report as report_cmd
from tierscope.cli import repro as repro_cmd
from tierscope.cli import run as run_cmd
from tierscope.cli import sweep as sweep_cmd
from tierscope.cli import trace as trace_cmd
from tierscope.cli import tune as tune_cmd
from tierscope.cli import validate as validate_cmd

#: Exit status for bad input, as argparse uses for bad options.
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
#: What an interrupted command says: an output is all or nothing, but a sweep keeps
#: the runs it finished (and resumes from them).
INTERRUPTED = "interrupted; nothing half-written was kept (a sweep keeps the runs it finished)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tierscope",
        description=(
            "Compare hot/cold memory telemetry (DAMON, Telescope, linear scanning, PEBS, "
            "PML) on simulated x86-64 hardware or a KVM guest. See "
            "docs/reference/EXPERIMENTS.md for the experiment-file format."
        ),
    )
    from tierscope import __version__

    parser.add_argument("--version", action="version", version=f"tierscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run_cmd.register(sub)
    compare_cmd.register(sub)
    measure_cmd.register(sub)
    repro_cmd.register(sub)
    report_cmd.register(sub)
    sweep_cmd.register(sub)
    tune_cmd.register(sub)
    trace_cmd.register(sub)
    validate_cmd.register(sub)
    return parser


def _unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """One line for an unknown subcommand, with the closest known one (argparse would
    print its usage and the whole list)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or any(a in ("-h", "--help", "--version") for a in argv[: argv.index(first)]):
        return None
    commands = [
        name
        for action in parser._subparsers._group_actions  # type: ignore[union-attr]
        for name in getattr(action, "choices", {}) or {}
    ]
    if first in commands:
        return None
    close = difflib.get_close_matches(first, commands, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"unknown command `{first}`{hint}; commands: {', '.join(commands)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    # Imported here so that `tierscope --help` works even if the extension is broken.
    from tierscope import Cancelled, ConfigError, OutputError, RunError, Unavailable, outdir

    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    unknown = _unknown_command(parser, given)
    if unknown:
        print(f"tierscope: error: {unknown}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(given)
    outdir.set_command(sys.argv[1:] if argv is None else argv)
    try:
        status: int = args.func(args)
        return status
    except (ConfigError, OutputError) as e:
        print(f"tierscope: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Unavailable as e:
        print(f"tierscope: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): nothing more to say to it.
        sys.stderr.close()
        return 0
    except (KeyboardInterrupt, Cancelled):
        print(f"tierscope: {INTERRUPTED}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RunError as e:
        print(f"tierscope: run failed: {e}", file=sys.stderr)
        return 1
