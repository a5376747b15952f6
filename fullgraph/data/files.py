"""Small file helpers every on-disk format shares: a streamed sha256 and a checked JSON read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fullgraph.errors import InputError

__all__ = ["sha256_file", "read_json"]


def sha256_file(path: Path, block: int = 1 << 22) -> str:
    """The sha256 of a file, read in blocks (never the whole file in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json(path: Path):
    """The parsed JSON of ``path``; an unreadable or malformed file is one ``InputError``."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"expected valid JSON in {path} (got {type(e).__name__}: {e})") from None
