"""Prefect flows: orchestration only. Each task calls one stage function from its package.

Importing this package sets quiet, offline-friendly Prefect defaults unless the user set them.
"""

import os

for _name, _value in {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # The terminal shows benchsmith's own messages; a failed stage's error reaches the CLI as an exception
    # (one line for a user error, a traceback otherwise). Prefect still sends every log to its API and UI.
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
}.items():
    os.environ.setdefault(_name, _value)
