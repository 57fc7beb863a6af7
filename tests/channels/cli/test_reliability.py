"""The ``cove`` command on the paths a new user hits: signals, odd databases, empty requests.

Real files against the fake endpoint; real subprocesses where signals, processes or file modes
are the point, in process otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result

from tests.channels.cli.helpers import Cove, CoveProcess, hold_conversation, wait_for_requests
from tests.channels.cli.test_signals import SPIN
from tests.fakes.openai_server import FakeOpenAI
from tests.scripted import reply

pytestmark = pytest.mark.slow  # cove processes, each with its sandbox workers


def no_traceback(result: subprocess.CompletedProcess[str] | Result) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (workers, the zygote and its children), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_block_start(proc: subprocess.Popen[str]) -> str:
    """Read ``--events`` lines until a block starts; return the conversation id."""
    assert proc.stdout is not None
    conversation_id = ""
    for line in proc.stdout:
        event = json.loads(line)
        conversation_id = event.get("conversation_id") or conversation_id
        if event["type"] == "block_started":
            return conversation_id
    raise AssertionError("the turn ended before its block started")


# --- item 2: SIGTERM is a Ctrl-C ----------------------------------------------------------


def test_sigterm_cancels_a_run_records_it_stops_workers_and_exits_5(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN)
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = proc_cli.popen("run", "--events", "spin")
    cid = wait_for_block_start(proc)
    workers = descendants(proc.pid)
    assert workers
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert "Traceback" not in err
    assert not [pid for pid in workers if alive(pid)]
    turn = proc_cli.json("show", cid)["turns"][0]
    assert turn["status"] == "cancelled"
    assert turn["iterations"][0]["status"] == "cancelled"


def test_sigterm_in_chat_cancels_the_turn_and_leaves_with_5(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(SPIN)
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", "chat"],
        env=proc_cli.env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write("spin\n")
    proc.stdin.flush()
    wait_for_requests(server, 1)
    [conv] = proc_cli.json("list")
    for _ in range(600):  # the reply is recorded when it arrives (item 8): the block runs next
        if proc_cli.json("show", conv["id"])["turns"][0]["iterations"][0]["raw_reply"]:
            break
    else:
        raise AssertionError("the reply was never recorded")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert "Traceback" not in err
    assert f"conversation {conv['id']} saved" in out
    assert proc_cli.json("show", conv["id"])["turns"][0]["status"] == "cancelled"


def test_sigterm_while_chat_waits_for_input_leaves_cleanly_with_5(proc_cli: CoveProcess) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cove", "chat"],
        env=proc_cli.env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert "cove" in proc.stdout.readline()  # the banner: it is up and about to read
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert "Traceback" not in err
    assert "saved" not in out  # no conversation was started


# --- item 3: delete refuses a conversation another process is running ------------------------


def test_delete_refuses_a_conversation_whose_turn_runs_elsewhere(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    conv_id, slow = hold_conversation(proc_cli, server)
    refused = proc_cli("delete", conv_id, "--yes")
    assert refused.returncode == 6, refused.stderr
    assert "running a turn" in refused.stderr
    no_traceback(refused)
    slow.send_signal(signal.SIGTERM)
    _, err = slow.communicate(timeout=30)
    assert slow.returncode == 5, err
    assert proc_cli("delete", conv_id, "--yes").returncode == 0


# --- item 4: another application's SQLite database -------------------------------------------


def test_a_foreign_sqlite_database_is_refused_unchanged(cli: Cove) -> None:
    with sqlite3.connect(cli.db) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        db.execute("INSERT INTO notes (text) VALUES ('buy milk')")
    db.close()
    before = cli.db.read_bytes()
    for command in (("list",), ("run", "hello")):
        result = cli(*command)
        assert result.exit_code == 9, result.stderr
        assert "not a cove database" in result.stderr
        assert "another application" in result.stderr
        no_traceback(result)
    assert cli.db.read_bytes() == before
    assert sorted(p.name for p in cli.db.parent.iterdir() if p.name.startswith("cove.db")) == [
        "cove.db"
    ]


# --- item 5: a read-only database can be read -------------------------------------------------


def unprivileged(cmd: list[str]) -> list[str]:
    """``cmd`` without the capabilities that let root ignore file modes."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *cmd]


def run_read_only(proc_cli: CoveProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        unprivileged([sys.executable, "-m", "cove", *args]),
        env=proc_cli.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("what", ["file", "folder"])
def test_inspection_commands_work_on_a_read_only_database(
    tmp_path: Path, proc_cli: CoveProcess, server: FakeOpenAI, what: str
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    proc_cli.db = folder / "cove.db"
    proc_cli.env["COVE_DB"] = str(proc_cli.db)
    server.add_replies(reply(["total = 6"], "The total is {{total}}.", title="Sums"))
    assert proc_cli("run", "add numbers").returncode == 0
    [conv] = proc_cli.json("list")
    before = tree_bytes(folder)
    proc_cli.db.chmod(0o444)
    if what == "folder":
        folder.chmod(0o555)
    try:
        probe = run_read_only(proc_cli, "run", "-c", conv["id"], "write something")
        assert probe.returncode != 0  # the test really runs without write access
        listed = run_read_only(proc_cli, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [c["id"] for c in json.loads(listed.stdout)] == [conv["id"]]
        shown = run_read_only(proc_cli, "show", conv["id"], "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["turns"][0]["answer"] == "The total is 6."
        found = run_read_only(proc_cli, "search", "numbers", "--json")
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)
        exported = run_read_only(proc_cli, "export", conv["id"])
        assert exported.returncode == 0, exported.stderr
        assert "The total is 6." in exported.stdout
        for result in (listed, shown, found, exported):
            no_traceback(result)
    finally:
        folder.chmod(0o755)
        proc_cli.db.chmod(0o644)
    if what == "folder":
        assert tree_bytes(folder) == before


def test_a_read_only_database_with_an_old_schema_says_so(
    tmp_path: Path, proc_cli: CoveProcess
) -> None:
    from tests.persistence.test_store_opening import make_schema_1_database

    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "old.db"
    make_schema_1_database(db)
    before = db.read_bytes()
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        result = run_read_only(proc_cli, "--db", str(db), "list")
    finally:
        folder.chmod(0o755)
    assert result.returncode == 9, result.stderr
    assert "schema version 1" in result.stderr and "read-only" in result.stderr
    no_traceback(result)
    assert db.read_bytes() == before


# --- item 6: a folder, or a path in a folder that does not exist -----------------------------


def test_a_database_path_that_is_a_folder_says_so(tmp_path: Path, cli: Cove) -> None:
    for command in (("list",), ("run", "hi")):
        result = cli("--db", str(tmp_path), *command)
        assert result.exit_code == 9
        assert "is a directory" in result.stderr
        no_traceback(result)


def test_read_only_commands_create_nothing_and_run_says_once_it_created_the_database(
    tmp_path: Path, cli: Cove, server: FakeOpenAI
) -> None:
    db = tmp_path / "new" / "place" / "cove.db"
    for command in (("list",), ("search", "x"), ("show", "abc")):
        result = cli("--db", str(db), *command)
        assert result.exit_code in (0, 7), result.stderr
        no_traceback(result)
    assert not (tmp_path / "new").exists()
    server.add_replies(reply(["a = 1"], "one"), reply(["b = 2"], "two"))
    first = cli("--db", str(db), "run", "first")
    assert first.exit_code == 0, first.stderr
    assert first.stderr.count(f"created a new database at {db}") == 1
    second = cli("--db", str(db), "run", "second")
    assert "created" not in second.stderr
    assert db.exists()


# --- item 7: an unopenable database ----------------------------------------------------------


def test_an_unopenable_database_fails_without_a_traceback(proc_cli: CoveProcess) -> None:
    for _ in range(5):  # the stray-thread traceback came and went from run to run
        result = proc_cli("--db", "/proc/cove.db", "run", "hi")
        assert result.returncode == 9
        assert "cannot open database /proc/cove.db" in result.stderr
        no_traceback(result)
        listed = proc_cli("--db", "/proc/cove.db", "list")  # nothing there to read, nothing made
        assert listed.returncode == 0 and "no conversations" in listed.stdout
        no_traceback(listed)


# --- item 10: an empty request makes no conversation -----------------------------------------


def test_an_empty_request_creates_no_conversation(cli: Cove) -> None:
    empty = cli("run", "  ")
    assert empty.exit_code == 2
    assert "the request is empty" in empty.stderr
    no_traceback(empty)
    chat = cli("chat", stdin="")
    assert chat.exit_code == 0, chat.stderr
    assert "saved" not in chat.stdout
    chat = cli("chat", stdin="\n   \n/quit\n")
    assert "saved" not in chat.stdout
    assert cli.json("list") == []


# --- item 11: show --turn of a turn that does not exist --------------------------------------


def test_show_of_a_missing_turn_names_the_turns_and_exits_7(cli: Cove, server: FakeOpenAI) -> None:
    server.add_replies(reply(["a = 1"], "one"), reply(["b = 2"], "two"))
    assert cli("run", "first").exit_code == 0
    [conv] = cli.json("list")
    assert cli("run", "-c", conv["id"], "second").exit_code == 0
    result = cli("show", conv["id"], "--turn", "9")
    assert result.exit_code == 7
    assert "no turn 9" in result.stderr and "1..2" in result.stderr
    no_traceback(result)
    assert cli("show", conv["id"], "--turn", "2").exit_code == 0


# --- items 8 and 9: kill -9 during a block loses nothing that finished -----------------------

SPIN_CODE = {"code": "while True:\n    pass", "timeout_s": 60}


def wait_for_block(proc: subprocess.Popen[str], index: int) -> str:
    """Read ``--events`` lines until block ``index`` (1-based) starts; return the conversation."""
    assert proc.stdout is not None
    conversation_id = ""
    for line in proc.stdout:
        event = json.loads(line)
        conversation_id = event.get("conversation_id") or conversation_id
        if event["type"] == "block_started" and event["index"] == index:
            return conversation_id
    raise AssertionError(f"the turn ended before block {index} started")


def test_kill_9_during_a_block_keeps_the_reply_finished_blocks_and_totals(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(
        reply(["kept = [1, 2, 3]"]),  # a whole first iteration
        reply(["more = sum(kept)", SPIN_CODE], thinking="sum, then spin"),  # type: ignore[list-item]
    )
    proc_cli.env["COVE_BLOCK_TIMEOUT_MAX_S"] = "60"
    proc = proc_cli.popen("run", "--events", "long task")
    cid = wait_for_block(proc, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)

    turn = proc_cli.json("show", cid)["turns"][0]
    assert turn["status"] == "interrupted"
    first, second = turn["iterations"]
    assert first["status"] == "ok"
    assert second["status"] == "interrupted"
    assert second["raw_reply"] and "more = sum(kept)" in second["raw_reply"]
    assert second["thinking"] == "sum, then spin"
    assert [b["code"] for b in second["blocks"]] == ["more = sum(kept)"]
    assert second["planned_blocks"][1] == SPIN_CODE["code"]
    # Item 9: the turn's totals are what its iterations recorded, not 0.
    assert second["tokens_in"] > 0 and first["tokens_in"] > 0
    assert turn["tokens_in"] == first["tokens_in"] + second["tokens_in"]
    assert turn["tokens_out"] == first["tokens_out"] + second["tokens_out"]
    assert {v["name"]: v["preview"] for v in proc_cli.json("vars", cid)} == {
        "kept": "[1, 2, 3]",
        "more": "6",
    }
    shown = proc_cli("show", cid)
    assert "block 2 of 2 was running when the turn stopped" in shown.stdout
    assert "while True:" in shown.stdout
    exported = proc_cli("export", cid)
    assert "Block 2 of 2 was running when the turn stopped" in exported.stdout
    # A writing open runs crash recovery: it records the same totals the read-only view showed.
    server.add_replies(reply(["len(kept)"], "{{more}}"))
    resumed = proc_cli("run", "-c", cid, "continue")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "6"
    recovered = proc_cli.json("show", cid, "--turn", "1")["turns"][0]
    assert recovered["status"] == "interrupted"
    assert recovered["tokens_in"] == turn["tokens_in"]
    assert recovered["iterations"][1]["blocks"] == second["blocks"]


# --- #23 item 1: /cancel in chat stops a turn another process runs ---------------------------


def test_chat_stays_when_another_process_runs_the_turn_and_cancel_stops_it(
    proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    cid, slow = hold_conversation(proc_cli, server)
    try:
        server.add_replies(reply(["b = 2"], "my turn now"))
        chat = proc_cli("chat", cid, stdin="intrude\n/cancel\nnow me\n")
        _, slow_err = slow.communicate(timeout=60)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.communicate()
    assert chat.returncode == 0, chat.stderr
    no_traceback(chat)
    out = chat.stdout
    assert "busy" in out and "/cancel stops it" in out  # the chat stayed, saying what to do
    assert "stopping the turn another cove process runs" in out
    assert "stopped: the running turn was cancelled" in out
    assert "my turn now" in out  # the next request ran in the chat
    assert slow.returncode == 5, slow_err  # the process that ran the turn: cancelled
    statuses = [t["status"] for t in proc_cli.json("show", cid)["turns"]]
    assert statuses == ["done", "cancelled", "done"]


# --- #23 item 16: a read-only database location says so ----------------------------------------


@pytest.mark.parametrize("what", ["file", "folder", "new file"])
def test_a_read_only_database_location_says_it_is_read_only_and_where(
    tmp_path: Path, proc_cli: CoveProcess, server: FakeOpenAI, what: str
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / ("new.db" if what == "new file" else "cove.db")
    if what != "new file":
        server.add_replies(reply(["a = 1"], "one"))
        assert proc_cli("--db", str(db), "run", "first").returncode == 0
    if what == "file":
        db.chmod(0o444)
    else:
        folder.chmod(0o555)
    try:
        result = run_read_only(proc_cli, "--db", str(db), "run", "write something")
    finally:
        folder.chmod(0o755)
        if db.exists():
            db.chmod(0o644)
    assert result.returncode == 9, result.stderr
    no_traceback(result)
    assert "read-only" in result.stderr and str(db) in result.stderr
    assert "unable to open database file" not in result.stderr
    if what != "file":
        assert f"folder {folder}" in result.stderr  # where SQLite must write beside it


def test_an_unreadable_database_file_is_an_error_not_a_traceback(
    tmp_path: Path, proc_cli: CoveProcess, server: FakeOpenAI
) -> None:
    server.add_replies(reply(["a = 1"], "one"))
    assert proc_cli("run", "first").returncode == 0
    proc_cli.db.chmod(0o000)
    try:
        results = [run_read_only(proc_cli, *args) for args in (("list",), ("run", "-c", "x"))]
    finally:
        proc_cli.db.chmod(0o600)
    for result in results:
        assert result.returncode == 9, result.stderr
        no_traceback(result)
        assert "cannot read" in result.stderr and str(proc_cli.db) in result.stderr
