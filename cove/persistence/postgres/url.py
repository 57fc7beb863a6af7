"""PostgreSQL URLs: telling one from a path, and showing one without its password."""

from __future__ import annotations

from urllib.parse import urlsplit

#: The URL schemes that name a PostgreSQL database.
SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: str) -> bool:
    """Whether ``location`` is a PostgreSQL URL rather than a SQLite path."""
    return location.startswith(SCHEMES)


def redacted(url: str) -> str:
    """``url`` as messages and logs may show it: any password replaced by ``***`` (also one
    given as a ``password=`` query parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(unreadable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
        if item
    )
    shown = f"{parts.scheme}://{netloc}{parts.path}"  # urlunsplit drops an empty host's //
    return shown + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
