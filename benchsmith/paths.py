"""Where the repository's data folder is. benchsmith runs from a checkout (an editable install)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("BENCHSMITH_DATA_DIR") or REPO_ROOT / "data")
FONT_CANDIDATES = (
    DATA_DIR / "fonts" / "DejaVuSans-Bold.ttf",
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans-Bold.ttf"),
    Path("/Library/Fonts/Arial Bold.ttf"),
    Path("C:/Windows/Fonts/arialbd.ttf"),
)


def truetype_font() -> Path:
    """A bold TrueType font for rendering text: DejaVu (Debian's fonts-dejavu-core) or a system font."""
    for path in FONT_CANDIDATES:
        if path.exists():
            return path
    raise FileNotFoundError("no TrueType font found; install DejaVu (Debian: apt-get install fonts-dejavu-core) "
                            f"or copy DejaVuSans-Bold.ttf to {DATA_DIR / 'fonts'}")
