"""cove-notes: a notebook on the host that sandbox code can search, and add to with approval.

Both functions are plain typed functions: cove checks each argument against its type hint
before calling them, and shows their docstrings to the model.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cove.plugins import effect

MAX_NOTE_CHARS = 2_000


def _notes_file() -> Path:
    return Path(os.environ.get("NOTEBOOK_FILE", "~/.cove-notes.json")).expanduser()


def _load() -> list[dict[str, object]]:
    path = _notes_file()
    if not path.exists():
        return []
    notes = json.loads(path.read_text(encoding="utf-8"))
    return notes if isinstance(notes, list) else []


def notes_search(text: str = "") -> list[str]:
    """Search the person's notebook; the notes containing ``text`` (all notes when empty).

    Args:
        text: Words to look for, case-insensitively.
    """
    wanted = text.lower()
    return [str(n["text"]) for n in _load() if wanted in str(n.get("text", "")).lower()]


@effect("write")
def notes_add(text: str, tags: list[str] | None = None) -> int:
    """Add a note to the person's notebook; returns how many notes it holds now.

    Args:
        text: The note, at most 2,000 characters.
        tags: Words to file it under.
    """
    if not text.strip() or len(text) > MAX_NOTE_CHARS:
        raise ValueError(f"a note has 1 to {MAX_NOTE_CHARS:,} characters")
    notes = _load()
    notes.append({"text": text, "tags": tags or [], "at": time.time()})
    path = _notes_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notes), encoding="utf-8")
    return len(notes)
