"""Review tasks pushed to Label Studio and the reviews pulled back. Filled in by annotation/."""

from __future__ import annotations

import sqlalchemy as sa


class ReviewsMixin:
    engine: sa.Engine
