"""Change detection checks only what a block can reach, and still sees every in-place mutation."""

from __future__ import annotations

import pytest

from cove import codec
from cove.environment.sandbox.host.client import SandboxClient
from cove.environment.sandbox.worker.runtime import Runtime
from tests.environment.conftest import ok

BIG = "rows = list(range(100_000))"

# (setup blocks, the block that mutates, the variables that must get a new version)
MUTATIONS = {
    "alias": ([BIG, "alias = rows"], "alias.append(-1)", {"rows", "alias"}),
    "function": ([BIG, "def push(v):\n    rows.append(v)"], "push(-1)", {"rows"}),
    "function calling a function": (
        [BIG, "def push(v):\n    rows.append(v)", "def twice(v):\n    push(v)\n    push(v)"],
        "twice(-1)",
        {"rows"},
    ),
    "container element": ([BIG, "box = {'r': rows}"], "box['r'].append(-1)", {"rows", "box"}),
    "element mutated after leaving its container": (
        ["inner = [1]", "box = [inner]"],
        "box.pop().append(2)",
        {"inner", "box"},
    ),
    "method of a sandbox class": (
        [
            BIG,
            "class Log:\n    def add(self, v):\n        rows.append(v)",
            "log = Log()",
        ],
        "log.add(-1)",
        {"rows"},
    ),
    "closure": (
        [
            BIG,
            "def make():\n    xs = rows\n    def push(v):\n        xs.append(v)\n    return push",
        ],
        "push = make()\npush(-1)",
        {"rows", "push"},
    ),
    "bound method held in a variable": (
        [BIG, "put = rows.append"],
        "put(-1)",
        {"rows"},
    ),
    "default argument": (
        [BIG, "def push(v, into=rows):\n    into.append(v)"],
        "push(-1)",
        {"rows"},
    ),
    "element swapped for an equal object, then changed": (
        ["shared = {'k': 1}", "rows = [{'k': 1}]", "rows[0] = shared", "other = 1"],
        "shared['k'] = 2",
        {"shared", "rows"},
    ),
    "extension-returned object": (
        ["got = echo([1, 2])", "inner = got['args'][0]"],
        "inner.append(3)",
        {"got", "inner"},
    ),
    "generator": (
        [BIG, "def drain():\n    while rows:\n        yield rows.pop()", "gen = drain()"],
        "next(gen)",
        {"rows"},
    ),
}


@pytest.mark.parametrize("case", list(MUTATIONS))
async def test_each_mutation_path_yields_a_new_version(client: SandboxClient, case: str) -> None:
    setup, mutate, expected = MUTATIONS[case]
    for code in setup:
        await ok(client, code)
    outcome = await ok(client, mutate)
    changed = {c.name for c in outcome.changes}
    assert expected <= changed, (case, changed)
    assert not changed - expected - {"gen", "push"}, (case, changed)  # nothing untouched


async def test_the_new_version_holds_the_mutated_value(client: SandboxClient) -> None:
    await ok(client, "rows = [1, 2]\ndef push(v):\n    rows.append(v)")
    outcome = await ok(client, "push(3)")
    assert [(c.name, codec.decode(c.encoded or "")) for c in outcome.changes] == [
        ("rows", [1, 2, 3])
    ]


async def test_an_untouched_big_list_yields_no_version(client: SandboxClient) -> None:
    await ok(client, BIG + "\nx = 1")
    assert (await ok(client, "x = 1\nx + 1")).changes == ()
    assert [c.name for c in (await ok(client, "y = [x]")).changes] == ["y"]


def runtime() -> Runtime:
    return Runtime(request=lambda m: m, output_limit=1_000, value_limit=10_000_000)


def changed(rt: Runtime, code: str) -> set[str]:
    reply = rt.execute(code, 1, 0.0)
    assert reply["ok"], reply["error"]
    return {c["name"] for c in reply["changes"]}


def test_an_untouched_big_list_is_not_encoded_again() -> None:
    rt = runtime()
    assert changed(rt, BIG + "\nrows_by_key = {i: [i] for i in range(1000)}") == {
        "rows",
        "rows_by_key",
    }
    before = rt.tracker.encodes
    for _ in range(5):
        assert changed(rt, "x = 1\nx + 1") <= {"x"}
    assert rt.tracker.encodes - before == 1  # x, once: it is the same int afterwards
    assert changed(rt, "rows.append(1)") == {"rows"}
    assert rt.tracker.encodes - before == 2


def test_a_function_is_followed_only_to_the_globals_it_names() -> None:
    rt = runtime()
    changed(rt, BIG + "\nother = [1]\ndef inc(v):\n    return v + 1")
    before = rt.tracker.encodes
    assert changed(rt, "z = inc(1)") == {"z"}
    assert rt.tracker.encodes - before == 2  # z and inc: rows and other are not reachable


def test_a_failing_block_reports_what_it_changed_before_failing() -> None:
    rt = runtime()
    changed(rt, "xs = []")
    reply = rt.execute("xs.append(1)\n1 / 0", 1, 0.0)
    assert not reply["ok"]
    assert [c["name"] for c in reply["changes"]] == ["xs"]


def test_imports_and_rebinding_stay_tracked() -> None:
    rt = runtime()
    assert changed(rt, "import math\nfrom re import sub") == set()
    assert rt.tracker.imports == {"math": ("math", None), "sub": ("re", "sub")}
    assert changed(rt, "math = 3") == {"math"}
    assert "math" not in rt.tracker.imports
    assert changed(rt, "import math") == {"math"}  # the value is deleted; the import is back
    assert rt.tracker.imports["math"] == ("math", None)
    assert changed(rt, "del sub") == set()
    assert "sub" not in rt.tracker.imports


def test_restored_variables_are_not_encoded_again_by_the_next_block() -> None:
    rt = runtime()
    encoded = codec.encode(list(range(100_000)))
    snapshot = {"name": "rows", "kind": "value", "encoded": encoded}
    reply = rt.restore({"math": ["math", None]}, [snapshot], reset=True)
    assert reply["restored"] == ["rows"]
    before = rt.tracker.encodes
    assert changed(rt, "x = 1") == {"x"}
    assert rt.tracker.encodes - before == 1
    assert changed(rt, "rows.append(math.pi)") == {"rows"}


def test_a_full_check_still_sees_everything() -> None:
    rt = runtime()
    changed(rt, "xs = [1]\nys = [2]")
    rt.namespace["xs"].append(5)  # behind the tracker's back: only a full check can see it
    assert [c["name"] for c in rt.tracker.changes(rt.namespace)] == ["xs"]


def test_reading_a_list_or_dict_of_scalars_encodes_nothing() -> None:
    rt = runtime()
    changed(rt, BIG + "\nbook = {'a': 1, 'b': 2.5, 'c': 'x'}\npair = (1, 'a')")
    before = rt.tracker.encodes
    assert changed(rt, "n = len(rows) + rows[5] + len(book) + len(pair)") == {"n"}
    assert changed(rt, "rows[5] = rows[5]\nbook['a'] = book['a']") == set()
    assert rt.tracker.encodes - before == 1  # n only


@pytest.mark.parametrize(
    "mutation",
    [
        "rows[5] = -5",
        "rows[5] = 5.0",  # equal, but not the same value
        "rows.sort(reverse=True)",
        "rows.append(rows.pop(0))",
        "book['a'] = 1.0",
        "book['d'] = book.pop('a')",  # same values, a key renamed
        "book.update(a=book.pop('a'))",  # same items, another order
    ],
)
def test_changes_to_a_list_or_dict_of_scalars_are_seen(mutation: str) -> None:
    rt = runtime()
    changed(rt, BIG + "\nbook = {'a': 1, 'b': 2.5, 'c': 'x'}")
    assert changed(rt, mutation) == ({"book"} if "book" in mutation else {"rows"})


ROWS = "rows = [{'id': i, 'name': f'row {i}', 'score': i * 0.5} for i in range(1000)]"
LISTS = "lists = [list(range(10)) for _ in range(100)]"


def test_reading_a_table_encodes_nothing() -> None:
    rt = runtime()
    changed(rt, ROWS + "\n" + LISTS + "\npairs = [(i, str(i)) for i in range(10)]")
    before = rt.tracker.encodes
    code = "n = len(rows) + sum(r['score'] for r in rows) + len(lists[3]) + pairs[2][0]"
    assert changed(rt, code) == {"n"}
    assert rt.tracker.encodes - before == 1


@pytest.mark.parametrize(
    ("mutation", "name"),
    [
        ("rows[3]['score'] = 1.0", "rows"),
        ("rows[3]['score'] = rows[3]['score'] + 0", "rows"),  # an equal float, a new object
        ("rows[3]['extra'] = 1", "rows"),
        ("del rows[3]['id']", "rows"),
        ("rows[3]['key'] = rows[3].pop('id')", "rows"),
        ("rows[2], rows[3] = rows[3], rows[2]", "rows"),
        ("rows.append(rows.pop(0))", "rows"),
        ("lists[3][4] = -1", "lists"),
        ("lists[3].append(lists[4].pop())", "lists"),
        ("lists[3] = lists[3] + [1]", "lists"),
    ],
)
def test_changes_to_a_table_are_seen(mutation: str, name: str) -> None:
    rt = runtime()
    changed(rt, ROWS + "\n" + LISTS)
    result = changed(rt, mutation)
    if mutation == "rows[3]['score'] = rows[3]['score'] + 0":
        assert result <= {"rows"}  # the same value: a new version is not required
    else:
        assert result == {name}


def test_a_row_held_by_another_variable_is_seen_when_changed_through_it() -> None:
    rt = runtime()
    changed(rt, ROWS + "\nthird = rows[3]")
    assert changed(rt, "third['score'] = -1") == {"third", "rows"}
    assert changed(rt, "rows[3]['score'] = -2") == {"third", "rows"}


def test_a_row_swapped_for_an_equal_copy_is_followed_afterwards() -> None:
    rt = runtime()
    changed(rt, LISTS)
    assert changed(rt, "copy = lists[3] + []\nlists[3] = copy") == {"copy"}
    assert changed(rt, "copy.append(1)") == {"copy", "lists"}
