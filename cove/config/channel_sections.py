"""The channels' sections of the settings: ``web``, ``telegram``, ``serve`` and ``tui``.

The web's and Telegram's flat keys carry their section's name (``web_token``,
``telegram_allow``: ``COVE_WEB_TOKEN``, ``COVE_TELEGRAM_ALLOW``); in a TOML file they sit in
their table without it (``[telegram] allow = [...]``). Tokens and secrets are hidden from
``repr`` and never shown in an error message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

from cove.config.checks import FLAT_KEY, invalid, not_negative, positive

#: Bot API limit for the files a bot may download.
TELEGRAM_MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
MIN_WEB_TOKEN_CHARS = 16
_USERNAME = re.compile(r"@[A-Za-z0-9_]{3,32}")
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what Telegram accepts as secret_token


@dataclass(frozen=True)
class WebSettings:
    """The web channel: its login token and the largest upload it takes.

    The token is hidden from ``repr``; an empty one counts as none (a new token each start).
    """

    FLAT_PREFIX: ClassVar[str] = "web_"

    token: str | None = field(default=None, repr=False)
    upload_limit_bytes: int | None = None  # None: the sandbox's max_file_read_bytes

    def __post_init__(self) -> None:
        object.__setattr__(self, "token", self.token or None)
        if self.token is not None and len(self.token) < MIN_WEB_TOKEN_CHARS:
            raise invalid(self, "token", f"must be at least {MIN_WEB_TOKEN_CHARS} characters")
        if self.upload_limit_bytes is not None:
            positive(self, "upload_limit_bytes")


@dataclass(frozen=True)
class TelegramSettings:
    """The Telegram bot: its token, the Bot API, who may talk, how updates arrive, its pace.

    The token (also read from ``TELEGRAM_BOT_TOKEN``) and the webhook secret are hidden from
    ``repr``. Rates follow Telegram's documented limits (about 30 messages a second overall,
    one a second in a chat, 20 a minute in a group); 0 turns a rate limit off.
    """

    FLAT_PREFIX: ClassVar[str] = "telegram_"

    token: str | None = field(default=None, repr=False)
    api_url: str = "https://api.telegram.org"  # the Bot API server; a trailing /bot is accepted
    allow: tuple[str, ...] = ()  # user or chat ids and @usernames allowed to talk; () = nobody
    webhook_url: str | None = None  # None: long polling
    webhook_host: str = "127.0.0.1"  # where the webhook server binds
    webhook_port: int = 8443  # 0: any free port
    # The token Telegram sends with each webhook request; None: a new random one each start.
    webhook_secret: str | None = field(default=None, repr=False)
    poll_timeout_s: float = 10.0  # how long one getUpdates waits for an update
    rate_per_s: float = 20.0  # Bot API calls a second over all chats (all nodes together)
    chat_rate_per_s: float = 1.0  # Bot API calls a second into one private chat
    group_rate_per_min: float = 20.0  # Bot API calls a minute into one group
    edit_interval_s: float = 1.5  # between two edits of a chat's status message
    group_edit_interval_s: float = 3.0  # the same in a group
    max_file_bytes: int = TELEGRAM_MAX_DOWNLOAD_BYTES  # the largest file taken from a chat

    def __post_init__(self) -> None:
        object.__setattr__(self, "token", (self.token or "").strip() or None)
        object.__setattr__(self, "webhook_url", self.webhook_url or None)
        positive(self, "poll_timeout_s", "max_file_bytes")
        not_negative(self, "rate_per_s", "chat_rate_per_s", "group_rate_per_min")
        not_negative(self, "edit_interval_s", "group_edit_interval_s")
        if not 0 <= self.webhook_port <= 65535:
            raise invalid(self, "webhook_port", f"must be 0 to 65535, got {self.webhook_port}")
        if self.webhook_secret is not None and not _WEBHOOK_SECRET.fullmatch(self.webhook_secret):
            raise invalid(self, "webhook_secret", "must be 1-256 of A-Z, a-z, 0-9, _ and -")
        for name in ("api_url", "webhook_url"):
            url = getattr(self, name)
            if url is not None and not _is_http_url(url):
                raise invalid(self, name, f"must be an http(s) URL, got {url!r}")
        try:
            parse_allow(self.allow)
        except ValueError as exc:
            raise invalid(self, "allow", f"entry {exc}") from None

    @property
    def api_root(self) -> str:
        """The Bot API server's root, ``https://api.telegram.org`` (a trailing ``/bot`` cut)."""
        url = self.api_url.strip().rstrip("/")
        return url[: -len("/bot")] if url.endswith("/bot") else url

    def allowed(self) -> tuple[frozenset[int], frozenset[str]]:
        """The allow-list as (user and chat ids, lower-cased @usernames without the ``@``)."""
        return parse_allow(self.allow)


@dataclass(frozen=True)
class ServeSettings:
    """``cove serve``: the service that runs channels together."""

    shutdown_grace_s: float = 30.0  # how long a shutdown waits for running turns
    # How many processes serve (conversation affinity between them); 0: one per core.
    processes: int = field(default=0, metadata={FLAT_KEY: "serve_processes"})

    def __post_init__(self) -> None:
        not_negative(self, "shutdown_grace_s", "processes")


@dataclass(frozen=True)
class TuiSettings:
    """The terminal UI."""

    # A command that opens an image file (its path is added as the last argument), e.g.
    # "xdg-open": the TUI opens a figure with it after writing the file. None: files only.
    figure_viewer: str | None = None


def parse_allow(entries: Iterable[str]) -> tuple[frozenset[int], frozenset[str]]:
    """An allow-list as (user and chat ids, lower-cased @usernames without the ``@``).

    An entry may hold several, separated by commas or semicolons.

    Raises:
        ValueError: An entry that is neither an integer id nor an @username.
    """
    ids: set[int] = set()
    names: set[str] = set()
    for raw in entries:
        for part in str(raw).replace(";", ",").split(","):
            part = part.strip()
            if _USERNAME.fullmatch(part):
                names.add(part[1:].lower())
            elif part:
                ids.add(_chat_id(part))
    return frozenset(ids), frozenset(names)


def _chat_id(part: str) -> int:
    try:
        return int(part)
    except ValueError:
        raise ValueError(
            f"{part!r} is neither a Telegram user or chat id (an integer) nor an @username"
        ) from None


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url.strip())
    return parts.scheme in ("http", "https") and bool(parts.netloc)
