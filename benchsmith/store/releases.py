"""Published releases and the questions each holds. Filled in by benchsmith.publish."""

from __future__ import annotations

import sqlalchemy as sa


class ReleasesMixin:
    engine: sa.Engine
