"""The `lakesink` command. Each subcommand imports its heavy modules (pyspark, boto3) lazily."""
from __future__ import annotations

import argparse
import sys


def _add_dev(sub: argparse._SubParsersAction) -> None:
    """`lakesink dev up|down|status`: the embedded local stack (owned by lakesink.devstack)."""
    from lakesink.devstack import cli as dev_cli

    dev_cli.add_parser(sub)


COMMAND_REGISTRARS = [_add_dev]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakesink",
        description="Archive Kafka topics to S3 with Confluent S3-sink naming and a Delta manifest.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in COMMAND_REGISTRARS:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from lakesink.errors import LakesinkError

    try:
        return int(args.func(args) or 0)
    except LakesinkError as e:
        print(f"lakesink: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
