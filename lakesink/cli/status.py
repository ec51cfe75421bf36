"""`lakesink status --config FILE [--max-lag N] [--max-age 15m]`: lag and health of one job, for schedulers."""
from __future__ import annotations

import argparse

from lakesink.cli.output import StatusResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help="per topic-partition: committed offset, end offset, lag, last commit age, orphans; "
                       "exit 1 past --max-lag/--max-age",
        description="Health of one job. Exit status 0 when healthy; 1 when a partition is more than --max-lag "
                    "records behind, has records waiting and its last commit is older than --max-age, or no "
                    "longer exists on the broker; FAILED (exit 1) when the last sink run failed (more than "
                    "--max-failures runs in a row), with its error line and log file. A job with no batch in the manifest is NEVER RUN (never OK): "
                    "without thresholds it exits 1 when records wait, 0 when its topics are empty; with "
                    "--max-lag/--max-age the thresholds judge it. S3 is checked first (as by sink): missing "
                    "credentials exit 3, an endpoint that does not answer exits 5; then the broker (as by sink): "
                    "a refused login, an untrusted certificate, a host that does not resolve or refuses exit 5. "
                    "No Spark session is started for a path manifest.")
    p.add_argument("--config", required=True, help="the job's connector config")
    p.add_argument("--max-lag", type=int, default=None, metavar="N", help="unhealthy past N records behind")
    p.add_argument("--max-age", default=None, metavar="DURATION",
                   help="unhealthy when records are waiting and the last commit is older (30s, 15m, 2h)")
    p.add_argument("--max-failures", type=int, default=0, metavar="N",
                   help="failed sink runs in a row tolerated before the job is FAILED (default 0: the last run "
                        "failing is enough)")
    p.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, output) -> StatusResult:
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_broker, check_stores
    from lakesink.driver.sink import parse_interval
    from lakesink.driver.status import Thresholds, status
    from lakesink.errors import InvalidArgumentError

    if args.max_lag is not None and args.max_lag < 0:
        raise InvalidArgumentError(f"--max-lag {args.max_lag}: must be 0 or more")
    if args.max_failures < 0:
        raise InvalidArgumentError(f"--max-failures {args.max_failures}: must be 0 or more")
    max_age = None if args.max_age is None else parse_interval(args.max_age, "--max-age")
    cfg = load_config(args.config)
    check_stores(cfg, writes=False)  # as sink and vacuum: missing credentials exit 3, a dead S3 endpoint 5, in seconds
    check_broker(cfg)  # as sink: a refused login, an untrusted certificate, a dead broker exit 5 at the first answer
    spark = lambda: session(cfg, args.master)  # noqa: E731 - only a catalog-table manifest needs Spark
    return StatusResult(status(cfg, Thresholds(args.max_lag, max_age, args.max_failures), spark=spark))
