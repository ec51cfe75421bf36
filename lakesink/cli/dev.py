"""`lakesink dev up|down|status`: the embedded local stack in the background (logic in lakesink.devstack.cli)."""
from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """up starts a Kafka broker, an S3 endpoint and a Schema Registry (Apicurio, Confluent API) on
127.0.0.1 as a detached background process (log in .lakesink/dev-stack.log) and prints how to reach them; status prints them (exit 1 if not running);
down stops them. Their pids and ports are kept in .lakesink/dev-stack.json of the current directory
unless --state-file says otherwise."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    from lakesink.devstack import cli as dev_cli  # here: lakesink.devstack.cli imports lakesink.cli.output

    dev = sub.add_parser("dev", help="run the local stack (Kafka broker + S3 endpoint + Schema Registry) in the background",
                         description=DESCRIPTION)
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION")
    dev.set_defaults(func=lambda args, output: (dev.print_help(), 2)[1])

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state-file", type=Path, default=dev_cli.DEFAULT_STATE,
                       help=f"where the stack's pids/ports are kept (default: {dev_cli.DEFAULT_STATE})")

    up = dev_sub.add_parser("up", help="start the broker, the S3 endpoint and the Schema Registry in the background")
    common(up)
    up.add_argument("--kafka-port", type=int, default=0, help="broker port (default: a free one)")
    up.add_argument("--s3-port", type=int, default=0, help="S3 endpoint port (default: a free one)")
    up.add_argument("--registry-port", type=int, default=0, help="Schema Registry port (default: a free one)")
    up.add_argument("--no-registry", action="store_true",
                    help="start no Schema Registry (it needs `lakesink setup --registry`'s download)")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the stack (default 120)")
    up.add_argument("--kafka-security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                    help="sasl_ssl: the broker also listens with SASL_SSL (SCRAM-SHA-512, a CA made for it); the "
                         "listener, user and CA file are printed, the password is in the state file")
    up.set_defaults(func=lambda args, output: dev_cli.up(args.state_file, args.kafka_port, args.s3_port,
                                                         args.timeout, args.registry_port, not args.no_registry,
                                                         args.kafka_security))

    down = dev_sub.add_parser("down", help="stop the background stack")
    common(down)
    down.add_argument("--timeout", type=float, default=30.0)
    down.set_defaults(func=lambda args, output: dev_cli.down(args.state_file, args.timeout))

    status = dev_sub.add_parser("status", help="print the background stack's endpoints (exit 1 if not running)")
    common(status)
    status.set_defaults(func=lambda args, output: dev_cli.status(args.state_file))
