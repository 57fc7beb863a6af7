"""The Telegram channel's options: the one place that reads its settings and its token.

The bot token comes from ``TELEGRAM_BOT_TOKEN`` (or the ``telegram_token`` setting). It is held
in a ``Secret`` that never shows in ``repr``, ``str``, logs or error messages, and the bot never
writes it anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from cove.config import Settings
from cove.errors import ConfigError

TOKEN_ENV = "TELEGRAM_BOT_TOKEN"
_USERNAME = re.compile(r"@[A-Za-z0-9_]{3,32}")
#: Bot API limit for files a bot may download.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


class Secret:
    """A string that never shows itself; ``reveal()`` hands it to the one place that needs it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class TelegramOptions:
    """What the bot needs besides ``Settings``: token, Bot API address, allow-list, mode."""

    token: Secret = field(repr=False)
    api_url: str = "https://api.telegram.org"
    allow: frozenset[int] = frozenset()
    #: Usernames (lower case, no ``@``) allowed too; weaker than ids, as a name can change hands.
    allow_usernames: frozenset[str] = frozenset()
    webhook_url: str = ""
    webhook_host: str = "127.0.0.1"
    webhook_port: int = 8443
    webhook_secret: Secret = field(default_factory=lambda: Secret(""), repr=False)
    poll_timeout_s: float = 10.0
    #: Bot API calls per second over all chats (Telegram: about 30 messages a second).
    global_rate: float = 20.0
    #: Seconds between two edits of one chat's status message (Telegram: about one message a
    #: second per chat, 20 a minute in a group).
    edit_interval_s: float = 1.5
    group_edit_interval_s: float = 3.0
    max_file_bytes: int = MAX_DOWNLOAD_BYTES

    @property
    def base_url(self) -> str:
        """``base_url`` for python-telegram-bot (it appends the token)."""
        return f"{self.api_url}/bot"

    @property
    def base_file_url(self) -> str:
        """``base_file_url`` for python-telegram-bot (it appends the token)."""
        return f"{self.api_url}/file/bot"

    @classmethod
    def load(
        cls,
        settings: Settings,
        env: Mapping[str, str],
        *,
        api_url: str | None = None,
        allow: str | None = None,
        webhook_url: str | None = None,
        **extra: object,
    ) -> TelegramOptions:
        """Options from ``settings.channels``, the token and explicit flags.

        The token is ``TELEGRAM_BOT_TOKEN``, else the ``telegram_token`` setting
        (``COVE_TELEGRAM_TOKEN``).

        Raises:
            ConfigError: No token, a malformed allow-list or URL.
        """
        channels = settings.channels
        token = (env.get(TOKEN_ENV) or channels.telegram_token or "").strip()
        if not token:
            raise ConfigError(f"set {TOKEN_ENV} to the bot's token (from @BotFather)")
        url = api_root(api_url or channels.telegram_api_url)
        hook = webhook_url if webhook_url is not None else (channels.telegram_webhook_url or "")
        if hook:
            _check_url(hook, "the webhook URL")
        ids, names = parse_allow(allow.split(",") if allow is not None else channels.telegram_allow)
        return cls(
            token=Secret(token),
            api_url=url,
            allow=ids,
            allow_usernames=names,
            webhook_url=hook,
            **extra,  # type: ignore[arg-type]
        )


def api_root(url: str) -> str:
    """The Bot API server's root: ``https://api.telegram.org`` (a trailing ``/bot`` dropped).

    Raises:
        ConfigError: Not an http(s) URL.
    """
    url = url.strip().rstrip("/")
    if url.endswith("/bot"):
        url = url[: -len("/bot")]
    _check_url(url, "the Bot API URL")
    return url


def parse_allow(entries: Iterable[str]) -> tuple[frozenset[int], frozenset[str]]:
    """The allow-list as (user and chat ids, lower-cased @usernames without the ``@``).

    Raises:
        ConfigError: An entry that is neither an integer id nor an @username.
    """
    ids: set[int] = set()
    names: set[str] = set()
    for raw in entries:
        for part in str(raw).replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            if _USERNAME.fullmatch(part):
                names.add(part[1:].lower())
                continue
            try:
                ids.add(int(part))
            except ValueError:
                raise ConfigError(
                    f"telegram_allow: {part!r} is neither a Telegram user or chat id (an "
                    "integer) nor an @username"
                ) from None
    return frozenset(ids), frozenset(names)


def _check_url(url: str, what: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{what} must be an http(s) URL, got {url!r}")
