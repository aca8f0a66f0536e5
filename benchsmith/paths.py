"""Where benchsmith's shipped folders are (data/, locks/): the checkout's (an editable install), else the
copy a wheel installs under <prefix>/share/benchsmith; BENCHSMITH_DATA_DIR / BENCHSMITH_LOCKS_DIR override."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def find_shipped_dir(name: str, marker: str, env=os.environ, checkout: Path = REPO_ROOT,
                     prefix: str = sys.prefix) -> Path:
    """A folder benchsmith ships beside its packages (data/, locks/): BENCHSMITH_<NAME>_DIR, else the
    checkout's when it holds `marker` (an editable install), else the copy a wheel installs under
    <prefix>/share/benchsmith."""
    if env.get(f"BENCHSMITH_{name.upper()}_DIR"):
        return Path(env[f"BENCHSMITH_{name.upper()}_DIR"])
    if (checkout / name / marker).exists():
        return checkout / name
    return Path(prefix) / "share" / "benchsmith" / name


DATA_DIR = find_shipped_dir("data", "dimensions.yaml")
LOCKS_DIR = find_shipped_dir("locks", "lock.py")
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

