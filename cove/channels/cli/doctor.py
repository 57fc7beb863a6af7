"""``cove doctor``: check configuration, database, sandbox and model endpoint, each OK or a fix."""

from __future__ import annotations

import asyncio
import os
import sys

from cove.channels.cli.base import command, examples, load_settings, unknown_variables
from cove.channels.cli.exits import EXIT_FAILED, EXIT_OK
from cove.channels.cli.models import listed_models
from cove.channels.cli.render import console_for, line
from cove.config import Settings
from cove.conversation import installed
from cove.conversation.memory import live_capacity, live_memory_budget
from cove.conversation.service.health import Check, run_checks
from cove.errors import ConfigError


@command(
    "doctor",
    short_help="Check configuration, database, sandbox and model endpoint.",
    epilog=examples("cove doctor", "COVE_DB=/tmp/x.db cove doctor"),
)
def doctor_command() -> int:
    """Check the configuration, the database, the sandbox and the model endpoint; say how to
    fix what fails (exit 1 when something does). Warnings do not fail."""
    return asyncio.run(_doctor(load_settings()))


async def _doctor(settings: Settings) -> int:
    console = console_for(sys.stdout)
    checks: list[Check] = [
        *await run_checks(settings),
        _environment(),
        _live(settings),
        _extensions(settings),
    ]
    for check in checks:
        mark = ("OK  ", "green") if check.ok else ("FAIL", "red")
        console.print(line(mark, f" {check.name}: {check.detail}"))
        for item in check.items:
            console.print(f"       {item}", markup=False, highlight=False)
        if not check.ok and check.fix:
            console.print(line(("     fix: ", "yellow"), check.fix))
    warning = await _unlisted_model(settings)
    if warning is not None:
        console.print(line(("WARN", "yellow"), f" {warning}"))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


def _environment() -> Check:
    unknown = ", ".join(unknown_variables(os.environ))
    if unknown:
        return Check("environment", False, f"unknown: {unknown}", "fix or remove the names above")
    return Check("environment", True, "no unknown COVE_* variables")


def _live(settings: Settings) -> Check:
    sandbox = settings.sandbox
    budget = live_memory_budget(sandbox.live_memory_mb) // (1024 * 1024)
    whose = "COVE_LIVE_MEMORY_MB" if sandbox.live_memory_mb else "a quarter of this machine's"
    capacity = live_capacity(sandbox.max_live_environments)  # the open-file limit may cut it
    cut = capacity < sandbox.max_live_environments
    return Check(
        "live environments",
        not cut,
        f"up to {capacity}, within {budget:,} MiB of worker memory "
        f"(PSS; {whose}); a serving process reports what they take at /metrics",
        "raise the open-file limit (ulimit -n) or lower COVE_MAX_LIVE_ENVIRONMENTS"
        if cut
        else None,
    )


def _extensions(settings: Settings) -> Check:
    catalog, rules = installed(settings)
    items = [
        f"{item.name} ({', '.join(item.effects)}) from {item.source}" for item in catalog.installed
    ]
    asking = sorted({r.function for r in rules if r.rule != "allow"})
    if asking:
        items.append(f"not simply allowed (ask or deny): {', '.join(asking)}")
    items += [f"FAILED {p.name} from {p.source}: {p.message}" for p in catalog.problems]
    count = f"{len(catalog.installed)} installed"
    try:
        catalog.select(settings.extensions.enabled)
    except ConfigError as exc:
        fix = "install them, or change `extensions` (COVE_EXTENSIONS) to name installed ones"
        return Check("extensions", False, f"setting extensions: {exc}", fix, tuple(items))
    if catalog.problems:
        failed = ", ".join(p.name for p in catalog.problems)
        fix = "reinstall or uninstall the plugin(s) named above; cove runs without them"
        return Check("extensions", False, f"{count}; failed to load: {failed}", fix, tuple(items))
    return Check("extensions", True, count, items=tuple(items))


async def _unlisted_model(settings: Settings) -> str | None:
    models = await listed_models(settings)
    if models is None or settings.model.name in models:
        return None
    return (
        f"model: {settings.model.name} is not among the {len(models)} models the endpoint lists "
        "(`cove models` shows them); set COVE_MODEL or --model"
    )
