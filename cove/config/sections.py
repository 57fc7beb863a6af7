"""The core's four sections of the settings, one frozen dataclass each, validated on construction.

Every field has a *flat key*, unique across sections: its own name, except ``ModelSettings.name``
whose flat key is ``model`` (the channels' sections, in ``channel_sections.py``, prefix theirs).
Flat keys are what the environment (``COVE_<FLAT KEY>``), flat TOML keys and
``Settings.replace``/``Settings.load`` overrides use; the sections route them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from cove.config.checks import FLAT_KEY, invalid, not_negative, positive

MEMORY_DB = ":memory:"


def default_data_dir() -> Path:
    """The user data directory for cove, as ``platformdirs`` finds it for this platform.

    On Linux that is ``$XDG_DATA_HOME/cove``, else ``~/.local/share/cove``; on macOS
    ``~/Library/Application Support/cove``; on Windows the local application data folder.
    """
    return platformdirs.user_data_path("cove", appauthor=False)


@dataclass(frozen=True)
class Price:
    """Price of a model in US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass(frozen=True)
class Endpoint:
    """Where one model is served when it is not the main endpoint (``[model.endpoints.NAME]``).

    Attributes:
        base_url: The OpenAI-compatible endpoint's base URL (None: OpenAI's API).
        api_key: Its API key (hidden from ``repr``; None: the main endpoint's key is not
            sent there, the placeholder is).
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "o4-mini": Price(1.1, 4.4),
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
}


@dataclass(frozen=True)
class ModelSettings:
    """The model endpoint: which model, where, with which key, how patiently, at what price.

    The API key is never written to the database, logs or events, and is hidden from ``repr``.
    """

    name: str = field(default="gpt-4.1-mini", metadata={FLAT_KEY: "model"})
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    request_timeout_s: float = 120.0
    max_retries: int = 4  # per model call: the openai package's retries and broken-reply re-sends
    retry_base_delay_s: float = 0.5  # the first pause before re-sending a broken reply (doubles)
    reasoning_effort: bool = False  # send reasoning_effort to the endpoint
    # Attach the newest figure of the journal to each model call as an image (models that
    # accept images); it counts as budgets.IMAGE_CHARS of the context message.
    model_images: bool = False
    prices: Mapping[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    # The fallback order: when a model's retries are exhausted (rate limits, 5xx, timeouts,
    # no connection), the turn goes on with the next of these it has not tried.
    models: tuple[str, ...] = ()
    # Models served elsewhere than base_url: name -> its endpoint ([model.endpoints.NAME]).
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive(self, "request_timeout_s")
        not_negative(self, "max_retries", "retry_base_delay_s")
        for name in self.models:
            if not name.strip():
                raise invalid(self, "models", "has an empty model name")

    def price_of(self, model: str) -> Price | None:
        """The price entry for ``model``, or None when the model is unknown."""
        return self.prices.get(model)

    def fallbacks(self, model: str) -> tuple[str, ...]:
        """The models a turn asking for ``model`` tries, in order: it, then ``models``."""
        return (model, *(name for name in self.models if name != model))

    def configured(self) -> tuple[str, ...]:
        """The models the settings name: the main one, the fallback list, the endpoints'."""
        return tuple(dict.fromkeys((self.name, *self.models, *self.endpoints)))

    def one_per_endpoint(self) -> tuple[str, ...]:
        """The main model, then one model of each other endpoint: what to list models with."""
        seen = {(self.base_url, self.api_key)}
        picked = [self.name]
        for name, endpoint in self.endpoints.items():
            if (endpoint.base_url, endpoint.api_key) not in seen:
                seen.add((endpoint.base_url, endpoint.api_key))
                picked.append(name)
        return tuple(picked)

    def for_model(self, model: str) -> ModelSettings:
        """These settings for a client of ``model``: on its own endpoint when it has one."""
        endpoint = self.endpoints.get(model)
        if endpoint is None:
            return replace(self, name=model)
        return replace(self, name=model, base_url=endpoint.base_url, api_key=endpoint.api_key)


@dataclass(frozen=True)
class LoopSettings:
    """The bounds of a turn's loop: iterations, errors, restarts and sub-queries."""

    max_iterations: int = 10
    max_extra_iterations_per_call: int = 10
    max_extra_iterations_total: int = 30
    error_budget: int = 5
    max_restarts: int = 2
    subquery_concurrency: int = 4
    subquery_max_per_turn: int = 64

    def __post_init__(self) -> None:
        positive(self, "max_iterations", "error_budget", "subquery_concurrency")
        not_negative(
            self,
            "max_extra_iterations_per_call",
            "max_extra_iterations_total",
            "max_restarts",
            "subquery_max_per_turn",
        )


@dataclass(frozen=True)
class SandboxSettings:
    """The sandbox: block timeouts, worker limits, the pool, confinement and quotas."""

    block_timeout_s: float = 10.0
    block_timeout_min_s: float = 1.0
    block_timeout_max_s: float = 120.0
    worker_memory_mb: int = 1024
    worker_cpu_s: int = 300
    worker_file_size_mb: int = 64
    worker_open_files: int = 64
    output_limit_chars: int = 20_000
    # The largest value a variable may hold, as its encoding: versions store only what changed
    # (chunks), so this bounds the worker's memory for one value, not the history; a larger
    # value is opaque (its preview is kept, it cannot be restored).
    value_limit_mb: int = 256
    worker_pool_size: int = 2
    max_file_read_bytes: int = 5_000_000
    sandbox_confine: bool = True  # workers drop to nobody and lose the network where possible
    sandbox_fork_server: bool = True  # workers are forked from a pre-initialised zygote
    # numpy, pandas and matplotlib in the sandbox when installed (the data extra): about a
    # second more to start the zygote and ~250 MB of each worker's address space.
    sandbox_libraries: bool = True
    # Host time one block may spend in extension calls (llm_query included); the block's own
    # clock stops during those calls, so this is what bounds a loop of them.
    extension_time_budget_s: float = 120.0
    workspace_quota_mb: int = 512  # one conversation's workspace: disk blocks + 1 KiB per entry
    workspace_max_entries: int = 100_000  # files, directories and links in one workspace
    # Conversations kept open with a worker each, at most: a ceiling on one process's workers
    # (and on its open files: 4 each); the memory budget below usually decides first.
    max_live_environments: int = 256
    # The memory (PSS of their workers) live environments may take, in MiB; past it the least
    # recently used idle ones close. 0: a quarter of the machine's memory.
    live_memory_mb: int = 0

    def __post_init__(self) -> None:
        positive(
            self,
            "block_timeout_s",
            "worker_memory_mb",
            "output_limit_chars",
            "value_limit_mb",
            "extension_time_budget_s",
            "workspace_quota_mb",
            "workspace_max_entries",
            "max_live_environments",
        )
        not_negative(self, "worker_pool_size", "live_memory_mb")
        if self.block_timeout_min_s > self.block_timeout_max_s:
            raise invalid(self, "block_timeout_min_s", "must not exceed block_timeout_max_s")


@dataclass(frozen=True)
class StoreSettings:
    """Where things live: the data directory, the database and the workspaces.

    Workspaces belong to their database: unless ``workspaces_dir`` is given, a database file
    outside the data directory keeps its workspaces beside it, in ``<stem>.workspaces``.
    """

    data_dir: Path = field(default_factory=default_data_dir)
    # "" means data_dir / "cove.db"; ":memory:" for tests; a postgresql:// URL for PostgreSQL
    db_path: str = ""
    workspaces_dir: str = ""  # "" means beside the database (see the class docstring)
    lease_ttl_s: float = 30.0  # how long a conversation's lease lasts without renewal
    # What one conversation's past versions may keep beyond its live state; past it, its oldest
    # versions are thinned (their values dropped; see docs/architecture.md, the value store).
    history_budget_mb: int = 1024

    def __post_init__(self) -> None:
        positive(self, "lease_ttl_s", "history_budget_mb")

    @property
    def database(self) -> str:
        """The database actually used: a SQLite path, or a PostgreSQL URL."""
        return self.db_path or str(self.data_dir / "cove.db")

    @property
    def _beside_file(self) -> bool:
        """Whether the database is a file other than the default one (its workspaces and
        figures then live beside it); not for the default, in-memory or PostgreSQL ones."""
        if not self.db_path or self.db_path == MEMORY_DB or "://" in self.db_path:
            return False
        db = Path(self.db_path).expanduser()
        return db.absolute() != (self.data_dir / "cove.db").absolute()

    @property
    def workspaces(self) -> Path:
        """The directory holding one workspace directory per conversation.

        ``workspaces_dir`` when given; else ``<data_dir>/workspaces`` for the default database
        (and for an in-memory or PostgreSQL one); else ``<db dir>/<db stem>.workspaces`` beside
        the database.
        """
        if self.workspaces_dir:
            return Path(self.workspaces_dir).expanduser()
        if not self._beside_file:
            return self.data_dir / "workspaces"
        db = Path(self.db_path).expanduser()
        return db.with_name(f"{db.stem}.workspaces")

    @property
    def figures(self) -> Path:
        """Where the CLI writes the figures it shows (one directory per conversation).

        ``<data_dir>/figures`` for the default database (and an in-memory or PostgreSQL one);
        else ``<db dir>/<db stem>.figures`` beside the database. The figures themselves live in
        the database; these files are copies made for a terminal to open.
        """
        if not self._beside_file:
            return self.data_dir / "figures"
        db = Path(self.db_path).expanduser()
        return db.with_name(f"{db.stem}.figures")
