"""Health checks behind ``cove doctor``: configuration, database, sandbox, model endpoint."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cove.config import ModelSettings, SandboxSettings, Settings, StoreSettings
from cove.environment.sandbox.host.pool import WorkerPool
from cove.environment.sandbox.worker.confine import LAYERS, Confinement
from cove.errors import ConfigError, CoveError
from cove.persistence.locations import is_postgres, shown
from cove.persistence.store import Store


@dataclass(frozen=True)
class Check:
    """One check's verdict; ``fix`` says what to do when it failed; ``items`` details it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    items: tuple[str, ...] = ()


def confinement_items(confinement: Confinement | None) -> tuple[str, ...]:
    """One line per layer of the sandbox's confinement: ``"seccomp: active"`` or why not."""
    if confinement is None:
        return tuple(f"{layer}: not reported" for layer in LAYERS)
    return tuple(f"{layer}: {confinement.layer(layer)}" for layer in LAYERS)


async def run_checks(settings: Settings) -> list[Check]:
    """Run every check; never raises."""
    return [
        _configuration(settings.model),
        await _database(settings.store),
        await check_sandbox(settings.sandbox),
        await check_endpoint(settings.model),
    ]


def _configuration(settings: ModelSettings) -> Check:
    endpoint = settings.base_url or "the OpenAI API (default)"
    key = "set" if settings.api_key else "not set"
    detail = f"model {settings.name}; endpoint {endpoint}; API key {key}"
    if not settings.api_key and not settings.base_url:
        return Check(
            "configuration",
            False,
            detail,
            "set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint), "
            "or run `cove demo` to try cove offline",
        )
    return Check("configuration", True, detail)


async def _database(settings: StoreSettings) -> Check:
    location = settings.database
    path = shown(location)  # a URL's password never shows
    try:
        if location != ":memory:" and not is_postgres(location):
            Path(location).parent.mkdir(parents=True, exist_ok=True)
        budget = settings.history_budget_mb * 1024 * 1024
        async with Store.open(location, history_budget=budget) as store:
            conversations = await store.list_conversations(limit=1_000_000)
            version = store.schema_version
            items = await value_items(store)
    except CoveError as exc:
        return Check(
            "database",
            False,
            f"{path}: {exc}",
            "point COVE_DB / --db at another file, or move this one away",
        )
    except OSError as exc:
        return Check("database", False, f"{path}: {exc}", "check the directory's permissions")
    return Check(
        "database",
        True,
        f"{path} (schema version {version}, {len(conversations)} conversations)",
        items=items,
    )


MB = 1024 * 1024
"""A megabyte as the settings count it (``history_budget_mb``)."""


async def value_items(store: Store, largest: int = 3) -> tuple[str, ...]:
    """Lines on the value store: its chunks, and the conversations whose values take the most
    room (live state, history against the history budget, thinned versions)."""
    totals = await store.value_stats()
    lines = [
        f"values: {totals['chunks']:,} chunks, {totals['bytes'] / MB:,.1f} MB"
        f" ({totals['garbage']:,} waiting to be collected); history budget "
        f"{store.history_budget / MB:,.0f} MB per conversation"
    ]
    for conversation_id in await store.largest_values(largest):
        figures = await store.history(conversation_id)
        lines.append(
            f"{conversation_id[:12]}: live {figures.live_bytes / MB:,.1f} MB, history "
            f"{figures.history_bytes / MB:,.1f} MB "
            f"({100 * figures.history_bytes / figures.budget_bytes:.0f}% of the budget), "
            f"{figures.thinned:,} of {figures.versions:,} versions thinned"
        )
    return tuple(lines)


async def check_sandbox(settings: SandboxSettings) -> Check:
    """Start a worker and run one block in it (no extensions, a scratch workspace)."""
    pool = WorkerPool(settings, size=0)
    try:
        with tempfile.TemporaryDirectory(prefix="cove-doctor-") as workspace:
            started = time.perf_counter()

            async def refuse(name: str, args: list[object], kwargs: dict[str, object]) -> object:
                raise CoveError("no extensions in the health check")

            client = await pool.acquire(workspace=Path(workspace), on_call=refuse)
            try:
                outcome = await client.execute("sum(range(10))", timeout_s=10, seed=0, clock=0.0)
                confinement = client.confinement
            finally:
                await client.aclose()
            elapsed = (time.perf_counter() - started) * 1000
    except CoveError as exc:
        return Check("sandbox", False, str(exc), "check the resource limits in the settings")
    finally:
        await pool.aclose()
    result = outcome.result
    if not result.ok or result.result_preview != "45":
        return Check(
            "sandbox",
            False,
            f"a test block gave {result.error or result.result_preview}",
            "reinstall cove (`make install`)",
        )
    confined = "not confined (sandbox_confine is off)"
    if confinement is not None and confinement.enabled:
        active = len(confinement.layers)
        confined = (
            f"runs as {confinement.user}, {active} of {len(LAYERS)} confinement layers active"
        )
    detail = f"worker started and ran a block in {elapsed:.0f} ms; {confined}"
    return Check("sandbox", True, detail, items=confinement_items(confinement))


async def check_endpoint(settings: ModelSettings) -> Check:
    """Whether the model endpoint answers (``GET /models``)."""
    from cove.engine.llm.openai import probe_endpoint  # the openai package is slow to import

    ok, detail = await probe_endpoint(settings)
    if ok:
        return Check("model endpoint", True, detail)
    return Check(
        "model endpoint",
        False,
        detail,
        "check OPENAI_BASE_URL / OPENAI_API_KEY, or that the server is running",
    )


#: How many of an endpoint's models an error names.
MODELS_SHOWN = 8


async def endpoint_models(settings: Settings) -> list[str]:
    """The names of the models the configured endpoint lists, sorted.

    Raises:
        ConfigError: No model endpoint is configured.
        ModelError: The endpoint failed or cannot be reached.
    """
    model = settings.model
    if not model.api_key and not model.base_url:
        raise ConfigError(
            "no model endpoint is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for "
            "another OpenAI-compatible server)"
        )
    from cove.engine.llm.openai import endpoint_models as listed  # slow to import

    return await listed(model)


async def model_not_offered(settings: Settings, model: str) -> ConfigError | None:
    """The error for a ``model`` the configured endpoint does not list, or None.

    None too when the models cannot be listed (no endpoint, the endpoint down or without a
    model list): the first turn then reports the endpoint's own error.
    """
    try:
        names = await endpoint_models(settings)
    except CoveError:
        return None
    if not names or model in names:
        return None
    shown = ", ".join(names[:MODELS_SHOWN]) + (", …" if len(names) > MODELS_SHOWN else "")
    where = settings.model.base_url or "the OpenAI API"
    return ConfigError(
        f"the model {model} is not offered by {where}, which lists {len(names)}: {shown}; "
        "choose one with COVE_MODEL (or `model` in the config file, or --model); "
        "`cove models` lists them all"
    )
