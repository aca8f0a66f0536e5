"""Where benchsmith's data folder is: the checkout's data/ (an editable install), else the copy a wheel
installs under <prefix>/share/benchsmith/data; BENCHSMITH_DATA_DIR overrides both."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def find_data_dir(env=os.environ, checkout: Path = REPO_ROOT, prefix: str = sys.prefix) -> Path:
    if env.get("BENCHSMITH_DATA_DIR"):
        return Path(env["BENCHSMITH_DATA_DIR"])
    if (checkout / "data" / "dimensions.yaml").exists():
        return checkout / "data"
    return Path(prefix) / "share" / "benchsmith" / "data"


DATA_DIR = find_data_dir()
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


def find_locks_dir(env=os.environ, checkout: Path = REPO_ROOT, prefix: str = sys.prefix) -> Path:
    """The lock files (locks/): the checkout's, else the copy a wheel installs under <prefix>/share."""
    if env.get("BENCHSMITH_LOCKS_DIR"):
        return Path(env["BENCHSMITH_LOCKS_DIR"])
    if (checkout / "locks" / "lock.py").exists():
        return checkout / "locks"
    return Path(prefix) / "share" / "benchsmith" / "locks"


LOCKS_DIR = find_locks_dir()
