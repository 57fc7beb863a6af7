"""``cove doctor``'s sandbox check lists every confinement layer, and a host where nothing takes
hold is warned about at start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cove.config import Settings
from cove.conversation.service.health import confinement_items, run_checks
from cove.environment.sandbox.host.pool import unconfined_warning
from cove.environment.sandbox.worker.confine import LAYERS, Confinement

pytestmark = pytest.mark.slow  # sandbox workers started per test
ONE_BACKEND = True  # the sandbox's checks: no database involved (tests/conversation/conftest.py)


async def sandbox_check_items(settings: Settings) -> tuple[str, ...]:
    [check] = [c for c in await run_checks(settings) if c.name == "sandbox"]
    assert check.ok, check.detail
    return check.items


async def test_the_sandbox_check_lists_each_layer(tmp_path: Path) -> None:
    items = await sandbox_check_items(
        Settings.load(
            env={}, sandbox_libraries=False, data_dir=tmp_path, base_url="http://127.0.0.1:9"
        )
    )
    assert [item.split(":")[0] for item in items] == list(LAYERS)
    if os.geteuid() == 0:  # CI: every layer holds on a root host of a recent kernel
        assert all(item.endswith(": active") for item in items), items


async def test_switched_off_every_layer_says_so(tmp_path: Path) -> None:
    settings = Settings.load(
        env={},
        sandbox_libraries=False,
        data_dir=tmp_path,
        base_url="http://127.0.0.1:9",
        sandbox_confine=False,
    )
    items = await sandbox_check_items(settings)
    assert items == tuple(f"{layer}: switched off (sandbox_confine)" for layer in LAYERS)


def test_a_missing_layer_says_why() -> None:
    confinement = Confinement(
        True, "me", 1000, "isolated", ("landlock: ENOSYS", "uid: not root"), ("network",)
    )
    items = confinement_items(confinement)
    assert "landlock: ENOSYS" in items and "uid: not root" in items
    assert "network: active" in items and "seccomp: not in force" in items


@pytest.mark.parametrize(
    ("layers", "warned"),
    [
        (("network", "ipc", "no_new_privs", "pdeathsig"), True),
        ((), True),
        (("mount",), False),
        (("landlock",), False),
        (("seccomp",), False),
        (("uid",), False),
    ],
)
def test_a_host_that_confines_nothing_is_warned_about(
    layers: tuple[str, ...], warned: bool
) -> None:
    confinement = Confinement(True, "me", 1000, "host", ("landlock: ENOSYS",), layers)
    warning = unconfined_warning(confinement)
    assert (warning is not None) == warned
    if warning is not None:
        assert "ENOSYS" in warning and "cove doctor" in warning
    assert unconfined_warning(Confinement(False, "me", 1000, "host")) is None
