"""A client nobody here wrote: the official MCP Inspector's command-line mode lists cove's
tools and calls one, over stdio (``cove mcp``) and over HTTP (``cove serve --mcp``).

The Inspector is an npm package, installed by ``make install`` (and ``make test``) into
``inspector/node_modules`` at the version its lock file pins; nothing is downloaded here. The
tests skip only where Node.js or npm is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.channels.mcp.helpers import TOKEN, mcp_env
from tests.channels.serve.process import ServeProcess

pytestmark = pytest.mark.slow  # Node.js processes and cove servers

INSPECTOR = Path(__file__).parent / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
COVE = Path(sys.executable).parent / "cove"


@pytest.fixture
def inspector() -> Path:
    """The installed Inspector (a test fails, not skips, when npm is there but it is not)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not installed: the MCP Inspector cannot run")
    assert INSPECTOR.exists(), "the MCP Inspector is not installed: run `make install`"
    return INSPECTOR


def inspect(inspector: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-inspector --cli ARGS``; its home (where it keeps a catalog) is ``home``."""
    env = {"PATH": str(Path(shutil.which("node") or "node").parent), "HOME": str(home)}
    return subprocess.run(
        [str(inspector), "--cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        stdin=subprocess.DEVNULL,
    )


def output(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def over_stdio(tmp_path: Path) -> list[str]:
    """The target arguments that make the Inspector start ``cove mcp`` on ``tmp_path``."""
    settings = [f"{key}={value}" for key, value in mcp_env(tmp_path).items()]
    return [str(COVE), "mcp", *(arg for pair in settings for arg in ("-e", pair))]


def test_the_inspector_lists_and_calls_tools_over_stdio(inspector: Path, tmp_path: Path) -> None:
    target = over_stdio(tmp_path)
    tools = output(inspect(inspector, tmp_path, *target, "--method", "tools/list"))["tools"]
    assert {"run_python", "ask_cove", "list_variables"} <= {tool["name"] for tool in tools}

    called = inspect(
        inspector, tmp_path, *target,
        "--method", "tools/call", "--tool-name", "run_python", "--tool-arg", "code=x = 6 * 7\nx",
    )  # fmt: skip
    result = output(called)
    assert result["isError"] is False and result["structuredContent"]["value"] == "42"

    failed = inspect(
        inspector, tmp_path, *target,
        "--method", "tools/call", "--tool-name", "run_python", "--tool-arg", "code=1 / 0",
    )  # fmt: skip
    assert failed.returncode != 0  # the Inspector reports a failed call as a failure
    assert "ZeroDivisionError" in failed.stdout + failed.stderr


def test_the_inspector_lists_and_calls_tools_over_http(inspector: Path, tmp_path: Path) -> None:
    service = ServeProcess(mcp_env(tmp_path), "--mcp")
    try:
        target = [f"{service.base_url}/mcp", "--header", f"Authorization: Bearer {TOKEN}"]
        tools = output(inspect(inspector, tmp_path, *target, "--method", "tools/list"))["tools"]
        assert "run_python" in {tool["name"] for tool in tools}
        called = inspect(
            inspector, tmp_path, *target,
            "--method", "tools/call", "--tool-name", "run_python", "--tool-arg", "code=2 ** 10",
        )  # fmt: skip
        assert output(called)["structuredContent"]["value"] == "1024"
    finally:
        service.stop()
