"""Where the log lines of the librdkafka clients a command builds go (the logger
:data:`lakesink.config.kafka_errors.LOGGER_NAME`): the run's log file (:func:`lakesink.runtime.logs.run_log_file`, or
a new one under ``$LAKESINK_LOG_DIR`` at the first line), or stderr with ``--verbose``/``--debug``. Never the
terminal otherwise: the command's error line says what failed."""
from __future__ import annotations

import logging
import sys

from lakesink.config.kafka_errors import LOGGER_NAME
from lakesink.runtime.logs import new_log_file, run_log_file

__all__ = ["route_client_logs", "RunLogHandler"]


class RunLogHandler(logging.Handler):
    """Appends each record to the run's log file, chosen at the first record."""

    def __init__(self):
        super().__init__()
        self.path: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.path is None:
                self.path = run_log_file() or new_log_file("kafka-client")
            with open(self.path, "a") as f:
                f.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - a log line never fails a command
            self.handleError(record)


def route_client_logs(verbose: bool) -> logging.Handler:
    """Send librdkafka's lines to stderr (``verbose``) or to the run's log file; returns the handler."""
    logger = logging.getLogger(LOGGER_NAME)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler: logging.Handler = logging.StreamHandler(sys.stderr) if verbose else RunLogHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s librdkafka %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return handler
