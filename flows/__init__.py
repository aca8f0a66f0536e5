"""Prefect flows: orchestration only. Each task calls one stage function from its package.

Importing this package sets quiet, offline-friendly Prefect defaults unless the user set them.
"""

import os

for _name, _value in {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}.items():
    os.environ.setdefault(_name, _value)
