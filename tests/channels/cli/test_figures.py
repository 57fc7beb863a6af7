"""Figures in the terminal commands: ``cove run`` and ``cove show`` name the file of every figure
of every block, ``cove export -o``
writes them beside the document (Markdown images, JSON ``file``), printed exports name them by
digest, and ``cove watch`` writes and names the figures of the turns it follows."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.channels.cli.helpers import Cove, CoveProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers

SQUARES = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')"


@pytest.fixture(autouse=True)
def with_libraries(cli: Cove) -> None:
    """The runs here draw with matplotlib in the sandbox."""
    cli.env.pop("COVE_SANDBOX_LIBRARIES")


def drawn(cli: Cove, server: FakeOpenAI) -> tuple[str, str]:
    """A conversation whose first turn drew one figure: its id and the figure's digest."""
    server.add_replies(reply(["x = 1", SQUARES], "drawn"))
    result = cli("run", "--json", "Draw the squares.")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    [figure] = data["figures"]
    return data["conversation_id"], figure["digest"]


def png_of(path: Path, digest: str) -> bool:
    data = path.read_bytes()
    return data.startswith(b"\x89PNG") and hashlib.sha256(data).hexdigest() == digest


def test_show_and_export_say_where_each_figure_is(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    cid, digest = drawn(cli, server)
    shown = cli("show", cid)
    assert shown.exit_code == 0, shown.stderr
    [named] = re.findall(r"^figure: (\S+) \((.*)\)$", shown.stdout, re.M)
    path = Path(named[0])
    assert path == tmp_path / "cove.figures" / cid / "t1-i1-b2-1.png"
    assert png_of(path, digest) and named[1] == "640×480 px; title 'squares'"
    path.unlink()  # shown again, written again
    markdown = cli("show", cid, "--format", "md").stdout
    assert f"![figure 1: 640×480 px; title 'squares']({path})" in markdown
    assert png_of(path, digest)

    printed = cli("export", cid).stdout  # no folder to put files in: the digest names it
    assert f"figure 1: 640×480 px; title 'squares' (PNG sha256 `{digest[:16]}`)" in printed

    document = tmp_path / "out" / "notes.md"
    document.parent.mkdir()
    written = cli("export", cid, "-o", str(document))
    assert written.exit_code == 0, written.stderr
    assert written.stdout == ""
    assert f"1 figures in {tmp_path / 'out' / 'notes.figures'}" in written.stderr
    text = document.read_text()
    assert "![figure 1: 640×480 px; title 'squares'](notes.figures/t1-i1-b2-1.png)" in text
    assert png_of(tmp_path / "out" / "notes.figures" / "t1-i1-b2-1.png", digest)

    as_json = tmp_path / "out" / "data.json"
    assert cli("export", cid, "--format", "json", "-o", str(as_json)).exit_code == 0
    exported = json.loads(as_json.read_text())
    assert exported["values"] == cli.json("show", cid)["values"]  # the JSON of cove show
    block = exported["turns"][0]["iterations"][0]["blocks"][1]
    assert block["figures"][0]["file"] == "data.figures/t1-i1-b2-1.png"
    assert png_of(tmp_path / "out" / "data.figures" / "t1-i1-b2-1.png", digest)


def test_run_and_show_name_every_figure_of_every_block(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    two = (
        "import matplotlib.pyplot as plt\n"
        "plt.figure(figsize=(4, 3)); plt.plot([1, 2]); plt.title('rising')\n"
        "plt.figure(figsize=(3, 3)); plt.plot([2, 1]); plt.title('falling')"
    )
    server.add_replies(reply([two, SQUARES], "three"), reply([two, SQUARES], "again"))
    result = cli("run", "Three charts.")
    assert result.exit_code == 0, result.stderr
    said = re.findall(r"^figure: (\S+) \((.*)\)$", result.stderr, re.M)
    [cid] = [c["id"] for c in cli.json("list")]
    folder = tmp_path / "cove.figures" / cid
    names = ["t1-i1-b1-1.png", "t1-i1-b1-2.png", "t1-i1-b2-1.png"]
    descriptions = [
        "400×300 px; title 'rising'",
        "300×300 px; title 'falling'",
        "640×480 px; title 'squares'",
    ]
    assert said == [(str(folder / n), d) for n, d in zip(names, descriptions, strict=True)]

    data = cli.json("run", "-c", cid, "Again.")
    assert [(Path(f["path"]).name, f["block"], f["figure"]) for f in data["figures"]] == [
        ("t2-i1-b1-1.png", 1, 1),
        ("t2-i1-b1-2.png", 1, 2),
        ("t2-i1-b2-1.png", 2, 1),
    ]
    assert all(png_of(Path(f["path"]), f["digest"]) for f in data["figures"])

    shown = re.findall(r"^figure: (\S+) \(", cli("show", cid).stdout, re.M)
    assert [Path(p).name for p in shown] == names + [n.replace("t1", "t2") for n in names]


def test_watch_writes_and_names_the_figures_it_sees(
    tmp_path: Path, cli: Cove, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "one"))
    assert cli("run", "first").exit_code == 0
    [conv] = cli.json("list")
    watcher = proc_cli.popen("watch", conv["id"], "--once")
    assert watcher.stderr is not None
    assert "watching" in watcher.stderr.readline()
    server.add_replies(reply([SQUARES], "drawn"))
    assert cli("run", "-c", conv["id"], "Draw the squares.").exit_code == 0
    out, err = watcher.communicate(timeout=120)
    assert watcher.returncode == 0, err
    path = tmp_path / "cove.figures" / conv["id"] / "t2-i1-b1-1.png"
    assert f"figure: {path} (640×480 px; title 'squares')" in out
    assert path.read_bytes().startswith(b"\x89PNG")

    # Replayed from the record (the second turn's events start above 2 << 32): JSON lines.
    path.unlink()
    replayed = proc_cli("watch", conv["id"], "--events", "--after", str((2 << 32) - 1), "--once")
    events = [json.loads(line) for line in replayed.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types.index("figure_saved") == types.index("block_finished") + 1
    saved = events[types.index("figure_saved")]
    assert (saved["turn"], saved["iteration"], saved["block"]) == (2, 1, 1)
    assert saved["path"] == str(path) and path.read_bytes().startswith(b"\x89PNG")
