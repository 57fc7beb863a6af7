"""Install extras: ``pip install cove`` runs, inspects and replays; a channel whose extra is
missing is one line naming the ``pip install`` to run.

The base install is a real one: a virtualenv in ``tmp_path`` holding cove and exactly the
distributions its base requirements pull in (resolved from their metadata), their files taken
from this environment's (linked, or copied across file systems), so nothing is downloaded and
``import starlette`` fails there as it does after ``pip install cove``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cove.channels.cli.extras import EXTRAS
from tests.channels.cli.helpers import FAKE_KEY, environment
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
PROJECT = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
CHANNELS = {"web": "web", "tui": "tui", "telegram": "telegram", "serve": "serve", "mcp": "mcp"}
"""Each channel command and the extra it needs."""


def _wanted(requirement: Requirement, extras: set[str]) -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": e}) for e in extras or {""})


def installed_by(requirements: list[str], extras: set[str] | None = None) -> set[str]:
    """The distributions (canonical names) that installing ``requirements`` brings, as this
    environment resolved them; ``cove[...]`` stands for the named extras of cove."""
    found: set[str] = set()
    pending = [(Requirement(text), extras or set()) for text in requirements]
    while pending:
        requirement, chosen = pending.pop()
        if not _wanted(requirement, chosen):
            continue
        name = canonicalize_name(requirement.name)
        if name == "cove":
            optional = PROJECT["optional-dependencies"]
            pending += [(Requirement(t), set()) for e in requirement.extras for t in optional[e]]
            continue
        if name in found:
            continue
        found.add(name)
        needs = metadata.distribution(name).requires or []
        pending += [(Requirement(text), set(requirement.extras)) for text in needs]
    return found


def test_every_extra_module_comes_with_its_extra_and_every_requirement_is_checked() -> None:
    """``EXTRAS`` (what a command checks) and ``pyproject.toml`` (what pip installs) agree."""
    optional = PROJECT["optional-dependencies"]
    assert set(CHANNELS.values()) <= set(optional)
    assert {"data", "dev", "all"} <= set(optional)
    modules_of = metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        brought = installed_by(optional[extra])
        for module in modules:  # each module checked is installed by the extra
            assert {canonicalize_name(d) for d in modules_of[module]} & brought, (extra, module)
        for text in optional[extra]:  # each direct requirement has a module checked
            requirement = Requirement(text)
            if requirement.name == "cove":  # another extra, checked on its own
                assert set(requirement.extras) <= set(EXTRAS)
                continue
            name = canonicalize_name(requirement.name)
            tops = {m for m, ds in modules_of.items() if name in map(canonicalize_name, ds)}
            assert tops & set(modules), (extra, requirement.name)
    assert set(optional["all"]) == {"cove[web,tui,telegram,serve,data,mcp,postgres]"}


def test_the_base_install_brings_no_channel_library() -> None:
    base = installed_by(PROJECT["dependencies"])
    for extra in ("web", "tui", "telegram", "serve", "data", "mcp"):
        own = installed_by(PROJECT["optional-dependencies"][extra]) - base
        assert own, f"the {extra} extra adds nothing to the base install"
    for name in (
        "starlette",
        "uvicorn",
        "textual",
        "python-telegram-bot",
        "prometheus-client",
        "mcp",
    ):
        assert name not in base


# -- a real base install ----------------------------------------------------------------------


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def base_install(where: Path) -> Path:
    """A virtualenv at ``where`` with cove and its base requirements only; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    here = Path(sysconfig.get_paths()["purelib"]).resolve()
    for name in sorted(installed_by(PROJECT["dependencies"]) | {"cove"}):
        # As installed here (not the metadata a source tree's build may leave beside the code).
        [dist] = metadata.distributions(name=name, path=[str(here)])
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file))).resolve()
            if source.is_relative_to(here) and source.is_file():  # not scripts in bin/
                _place(source, Path(site) / source.relative_to(here))
    return python


# The tests below are slow: a virtualenv, then a cove process (and a worker) per command.


@pytest.fixture(scope="module")
def base_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield base_install(tmp_path_factory.mktemp("base") / "venv")


def _cove(
    python: Path, env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(python), "-m", "cove", *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
    assert FAKE_KEY not in result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_the_base_install_lacks_the_extras(base_python: Path) -> None:
    probe = "import importlib.util as u; print([m for m in {} if u.find_spec(m)])"
    every = sorted({m for modules in EXTRAS.values() for m in modules} | {"numpy", "pandas"})
    base_only = [m for m in every if m not in ("markdown_it", "pygments")]  # rich's own
    found = subprocess.run(
        [str(base_python), "-c", probe.format(base_only)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert found.strip() == "[]"


@pytest.mark.slow
def test_a_stored_array_read_without_numpy_names_the_data_extra(base_python: Path) -> None:
    probe = (
        "from cove import codec\nfrom cove.errors import CodecError\n"
        'for text in (\'{"ndarray": "AAAA"}\', \'{"series": [1, 2, 3]}\'):\n'
        "    try:\n"
        "        codec.decode(text)\n"
        "    except CodecError as exc:\n"
        "        print(exc)\n"
    )
    shown = subprocess.run(
        [str(base_python), "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert shown.splitlines() == [
        "this value needs numpy: pip install 'cove[data]'",
        "this value needs pandas: pip install 'cove[data]'",
    ]


@pytest.mark.slow
@pytest.mark.slow
def test_run_inspect_and_replay_work_on_the_base_install(base_python: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        env = environment(tmp_path, server)
        env.pop("COVE_SANDBOX_LIBRARIES")  # on, as installed: the worker must do without them
        server.add_replies(
            reply(["total = sum([1, 2, 3])", "import numpy"], "no numpy"),
            reply(["total = sum([1, 2, 3])"], "The total is {{total}}."),
        )
        run = _cove(base_python, env, "run", "add 1, 2 and 3")
        assert run.returncode == 0, run.stderr
        assert run.stdout == "The total is 6.\n"
        [conv] = json.loads(_cove(base_python, env, "list", "--json").stdout)
        shown = _cove(base_python, env, "show", conv["id"])
        assert shown.returncode == 0, shown.stderr
        # The sandbox said how to get the data libraries.
        assert "pip install 'cove[data]'" in shown.stdout
        variables = _cove(base_python, env, "vars", conv["id"])
        assert variables.returncode == 0 and "total" in variables.stdout, variables.stderr
        replayed = _cove(base_python, env, "replay", conv["id"])
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        backup = _cove(base_python, env, "backup", str(tmp_path / "copy.db"))
        assert backup.returncode == 0, backup.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(CHANNELS))
def test_a_channel_without_its_extra_is_one_line_naming_the_pip_install(
    base_python: Path, tmp_path: Path, command: str
) -> None:
    extra = CHANNELS[command]
    result = _cove(base_python, environment(tmp_path, None), command)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    assert result.stderr.startswith(f"cove: cove {command} needs the {extra} extra: ")
    assert f"pip install 'cove[{extra}]'" in result.stderr
