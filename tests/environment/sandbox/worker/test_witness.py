"""The mutation witness misses no change: every route by which a block can change a value without
a guard seeing that very object still yields a new version holding the right value.

Each case sets up its variables, reads them once (so they are tracked and trusted: the next
check of an untouched one costs nothing), then runs the block that mutates. The version that
block reports, decoded from its chunks, must equal the live value.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from cove import codec
from cove.environment.sandbox.worker.runtime import Runtime

BIG = "nums = list(range(600))"  # several runs: the run-by-run paths, not a short value
TABLE = "rows = [{'id': i, 'qty': i % 7} for i in range(600)]"


class Session:
    """An in-process sandbox runtime, with the chunks every report carried."""

    def __init__(self, libraries: bool = False) -> None:
        self.runtime = Runtime(
            request=lambda frame: frame,
            output_limit=10_000,
            value_limit=50_000_000,
            libraries=libraries,
        )
        self.chunks: dict[str, bytes] = {}

    def run(self, code: str) -> dict[str, dict[str, Any]]:
        """Run one block; its changes by name."""
        reply = self.runtime.execute(code, 7, 0.0)
        assert reply["ok"], (code, reply["error"])
        for name, data in reply["chunks"]:
            self.chunks[name] = base64.b64decode(data)
        return {change["name"]: change for change in reply["changes"]}

    def stored(self, change: dict[str, Any]) -> Any:
        """The value a reported version holds, decoded from the chunks sent so far."""
        encoded = change["encoded"]
        assert encoded, change
        reached = codec.closure([encoded], self.chunks.__getitem__)
        return codec.decode(encoded, chunks=reached.__getitem__)

    def live(self, name: str) -> Any:
        return self.runtime.namespace[name]


def same(a: Any, b: Any) -> bool:
    limit = 1 << 30
    return codec.encode(a, max_bytes=limit) == codec.encode(b, max_bytes=limit)


# (setup blocks, the block that mutates, the variables that must get a new version)
ROUTES: dict[str, tuple[list[str], str, set[str]]] = {
    "a method call": ([BIG], "nums.append(-1)", {"nums"}),
    "an item write": ([BIG], "nums[3] = -1", {"nums"}),
    "an item deleted": ([BIG], "del nums[0]", {"nums"}),
    "augmented assignment to a list": ([BIG], "nums += [1, 2]", {"nums"}),
    "repeat in place": ([BIG], "nums *= 2", {"nums"}),
    "sort in place": ([BIG], "nums.sort(reverse=True)", {"nums"}),
    "a cell of a table": ([TABLE], "rows[7]['qty'] = 100", {"rows"}),
    "a cell through an alias": ([TABLE, "r = rows[0]"], "r['qty'] = 100", {"rows", "r"}),
    "a row replaced by an equal one": ([TABLE], "rows[9] = dict(rows[9])", set()),
    "a dict shared by two variables": (
        ["shared = {'k': 1}", "a = [shared, {'k': 2}]", "b = {'s': shared}"],
        "b['s']['k'] = 5",
        {"shared", "a", "b"},
    ),
    "an appended row changed later": (
        [TABLE, "new = {'id': -1, 'qty': 0}\nrows.append(new)"],
        "new['qty'] = 9",
        {"rows", "new"},
    ),
    "random.shuffle imported by name": (
        [BIG, "from random import shuffle"],
        "shuffle(nums)",
        {"nums"},
    ),
    "random.shuffle through the module": ([BIG, "import random"], "random.shuffle(nums)", {"nums"}),
    "heapq through the module": ([BIG, "import heapq"], "heapq.heappush(nums, -1)", {"nums"}),
    "heapq imported by name": ([BIG, "from heapq import heappush"], "heappush(nums, -1)", {"nums"}),
    "an impure import called, then dropped": (
        [BIG, "from heapq import heappush"],
        "heappush(nums, -1)\ndel heappush",
        {"nums"},
    ),
    "a bound method popped from its container and called": (
        [BIG, "box = [nums.append]"],
        "box.pop()(1)",
        {"nums", "box"},
    ),
    "a bound method called, then its variable rebound": (
        [BIG, "push = nums.append"],
        "push(1)\npush = None",
        {"nums", "push"},
    ),
    "a generator holding a bound method, run to its end": (
        [BIG, "def g(p):\n    p(1)\n    yield", "gen = g(nums.append)"],
        "list(gen)",
        {"nums"},
    ),
    "heapq imported in the same block": (
        [BIG],
        "from heapq import heappop as pop\npop(nums)",
        {"nums"},
    ),
    "heapq imported, called and dropped in one block": (
        [BIG],
        "from heapq import heappop as pop\npop(nums)\ndel pop",
        {"nums"},
    ),
    "a module function held in a variable": (
        [BIG, "import heapq\npush = heapq.heappush"],
        "push(nums, -1)",
        {"nums"},
    ),
    "bisect.insort": ([BIG, "import bisect"], "bisect.insort(nums, 7)", {"nums"}),
    "map over a bound method": ([BIG], "list(map(nums.append, [1, 2]))", {"nums"}),
    "an unbound method of list": ([BIG], "list.append(nums, 1)", {"nums"}),
    "an unbound method of a sandbox subclass": (
        [BIG, "class L(list):\n    pass"],
        "L.append(nums, 1)",
        {"nums"},
    ),
    "getattr by name": ([BIG], "getattr(nums, 'append')(1)", {"nums"}),
    "a bound method held in a variable, called a block later": (
        [BIG, "push = nums.append"],
        "push(1)",
        {"nums"},
    ),
    "a bound method in a container, called a block later": (
        [BIG, "box = {'f': nums.pop}"],
        "box['f']()",
        {"nums"},
    ),
    "a bound method in a closure": (
        [BIG, "def make(f):\n    return lambda v: f(v)", "add = make(nums.append)"],
        "add(1)",
        {"nums"},
    ),
    "a bound method as a default argument": (
        [BIG, "def add(v, f=nums.append):\n    f(v)"],
        "add(1)",
        {"nums"},
    ),
    "a bound method as a sort key": (
        [BIG, "k = nums.append"],
        "sorted([3, 1], key=lambda v: k(v) or v)",
        {"nums"},
    ),
    "a bound method as a key, held": (
        [BIG, "k = nums.count"],
        "sorted([3, 1], key=k)",
        set(),
    ),
    "a map object made a block earlier": (
        [BIG, "m = map(nums.append, [1, 2])"],
        "list(m)",
        {"nums"},
    ),
    "a function mutating a global, called later": (
        [BIG, "def add(v):\n    nums.append(v)"],
        "add(1)",
        {"nums"},
    ),
    "a method of a sandbox class": (
        [BIG, "class Log:\n    def add(self, v):\n        nums.append(v)", "log = Log()"],
        "log.add(1)",
        {"nums"},
    ),
    "a dataclass field factory": (
        [
            BIG,
            "from dataclasses import dataclass, field\n@dataclass\nclass D:\n"
            "    x: object = field(default_factory=nums.pop)",
        ],
        "d = D()",
        {"nums", "d"},
    ),
    "a defaultdict's factory": (
        [BIG, "import collections\ndd = collections.defaultdict(nums.pop)"],
        "dd['x']",
        {"nums", "dd"},
    ),
    "a ChainMap writing into the dict it holds": (
        [
            "book = {i: i for i in range(600)}",
            "import collections\ncm = collections.ChainMap(book)",
        ],
        "cm[-1] = 1",
        {"book", "cm"},
    ),
    "a generator advanced by next": (
        [BIG, "def g():\n    while True:\n        nums.append(1)\n        yield", "gen = g()"],
        "next(gen)",
        {"nums"},
    ),
    "a generator holding a bound method": (
        [BIG, "def g(p):\n    while True:\n        p(1)\n        yield", "gen = g(nums.append)"],
        "next(gen)",
        {"nums"},
    ),
    "a generator expression made a block earlier": (
        [BIG, "it = (nums.append(i) for i in range(3))"],
        "list(it)",
        {"nums"},
    ),
}


@pytest.mark.parametrize("case", list(ROUTES))
def test_every_route_yields_the_version_with_the_right_value(case: str) -> None:
    setup, mutate, expected = ROUTES[case]
    session = Session()
    for code in setup:
        session.run(code)
    names = sorted(n for n in session.runtime.tracker.state if not n.startswith("_"))
    session.run("\n".join(f"len({name})" for name in names if _sized(session.live(name))))
    changes = session.run(mutate)
    assert expected <= changes.keys(), (case, sorted(changes))
    for name, change in changes.items():
        if change["kind"] == "value" and name in session.runtime.tracker.state:
            assert same(session.stored(change), session.live(name)), (case, name)
    assert not session.run("\n".join(f"{n}" for n in names) or "pass"), case  # nothing left


def _sized(value: object) -> bool:
    return isinstance(value, list | dict | tuple | set)


def test_a_generator_collected_later_runs_its_finally_and_the_change_is_seen() -> None:
    session = Session()
    session.run(BIG)
    session.run("def g(p):\n    try:\n        yield\n    finally:\n        p(-1)")
    session.run("gen = g(nums.append)\nnext(gen)")
    session.run("len(nums)")
    changes = session.run("gen = None")  # the finally appends, with no guard to see it
    if "nums" not in changes:
        changes = session.run("len(nums)")
    assert session.live("nums")[-1] == -1
    assert same(session.stored(changes["nums"]), session.live("nums"))


def test_a_generator_finally_calling_an_imported_function_is_seen() -> None:
    """No guard runs for ``heappush(nums, -1)``, and the block that drops the generator reaches
    neither ``heappush`` nor ``nums``: the generator's end flags the witness, so ``nums`` is
    compared in full when next checked."""
    session = Session()
    session.run(BIG + "\nfrom heapq import heappush")
    session.run("def g():\n    try:\n        yield\n    finally:\n        heappush(nums, -1)")
    session.run("gen = g()\nnext(gen)")
    session.run("len(nums)")
    changes = session.run("gen = None")
    if "nums" not in changes:
        changes = session.run("len(nums)")
    assert session.live("nums")[0] == -1
    assert same(session.stored(changes["nums"]), session.live("nums"))


def test_a_method_fetched_outside_a_block_is_still_seen() -> None:
    """The witness is sticky: what a guard records between checks waits for the next one."""
    session = Session()
    session.run(BIG)
    session.run("len(nums)")
    guards_getattr = session.runtime.builtins["getattr"]
    guards_getattr(session.live("nums"), "append")(-1)  # as a finalizer of sandbox code would
    changes = session.run("len(nums)")
    assert same(session.stored(changes["nums"]), session.live("nums"))


def test_a_touch_of_one_variable_is_kept_until_that_variable_is_checked() -> None:
    session = Session()
    session.run(BIG + "\nother = [1, 2]")
    session.run("len(nums)\nlen(other)")
    session.runtime.builtins["getattr"](session.live("nums"), "append")(-1)
    assert "nums" not in session.run("len(other)")  # nums not reached: not checked yet
    changes = session.run("len(nums)")
    assert same(session.stored(changes["nums"]), session.live("nums"))


def test_appends_and_cell_writes_over_many_blocks_stay_exact() -> None:
    session = Session()
    session.run(TABLE)
    for step in range(40):
        code = [
            "rows.append({'id': -1, 'qty': 0})",
            "rows[-1]['qty'] = len(rows)",
            "rows[3]['qty'] += 1",
            "len(rows)",
            "rows.pop(0)",
        ][step % 5]
        changes = session.run(code)
        if code != "len(rows)":
            assert same(session.stored(changes["rows"]), session.live("rows")), code
        else:
            assert not changes


def test_a_long_list_kept_run_by_run_has_exactly_the_tree_the_codec_builds() -> None:
    session = Session()
    session.run("nums = list(range(3_000))\nbook = {i: i for i in range(3_000)}")
    steps = [
        "nums.append(-1)",
        "nums.extend(range(300))",
        "nums[7] = -7",
        "nums.pop()",
        "book[5] = -5",
        "book[-1] = 0",
        "nums.insert(0, 1)",
        "nums.append(nums.pop(0))",
    ]
    for code in steps * 3:
        for name, change in session.run(code).items():
            tree = codec.encode_tree(session.live(name), max_bytes=1 << 30, max_depth=100)
            assert change["encoded"] == tree.root, (code, name)
            assert same(session.stored(change), session.live(name)), (code, name)


def test_a_last_run_grown_item_by_item_has_exactly_the_tree_the_codec_builds() -> None:
    # The last run of each value only grows, so it is built on its kept item trees; between
    # the appends, writes to its rows, a row long enough to be stored in chunks of its own, and
    # removals make it build anew.
    session = Session()
    session.run(
        "rows = [{'id': i, 'name': f'item {i}', 'qty': i % 7} for i in range(600)]\n"
        "words = [f'w{i}' for i in range(300)]\nbook = {i: str(i) for i in range(300)}"
    )
    steps = [
        "rows.append({'id': -1, 'name': 'new', 'qty': 1})",
        "rows.append({'id': -2, 'name': 'newer', 'qty': 2})",
        "rows[-1]['qty'] = len(rows)",
        "rows.append({'id': -3, 'name': 'x' * 5000, 'qty': 3})",
        "rows.append({'id': -4, 'name': 'after', 'qty': 4})",
        "words.append('more')",
        "words.extend(['a', 'b'])",
        "book[len(book)] = 'added'",
        "rows.pop()",
        "rows.append({'id': -5, 'name': 'again', 'qty': 5})",
    ]
    for code in steps * 3:
        changes = session.run(code)
        assert changes, code
        for name, change in changes.items():
            tree = codec.encode_tree(session.live(name), max_bytes=1 << 30, max_depth=100)
            assert change["encoded"] == tree.root, (code, name)
            assert same(session.stored(change), session.live(name)), (code, name)


def test_growth_across_interior_groups_and_long_leaves_has_exactly_the_codec_tree() -> None:
    # 16,382 ints are 64 runs, one interior group short of a second level: appends add the
    # 65th run (a level of interior chunks appears), fill it, and change a member of a group
    # kept from the last encoding. Strings of 700 characters make a last run whose leaf text
    # passes LEAF_CHARS while it grows, so it is split in halves.
    session = Session()
    session.run("nums = list(range(16_382))\ntexts = ['x' * 700 for _ in range(300)]")
    steps = [
        *["nums.append(-1)"] * 4,
        "nums.extend(range(300))",
        "nums[100] = -len(nums)",
        "nums.append(len(nums))",
        *["texts.append('y' * 700)"] * 3,
        "texts.extend(['z' * 700] * 60)",
        "texts.append('w')",
        "nums.pop()",
        "nums.append(7)",
    ]
    for code in steps * 2:
        changes = session.run(code)
        assert changes, code
        for name, change in changes.items():
            tree = codec.encode_tree(session.live(name), max_bytes=1 << 30, max_depth=100)
            assert change["encoded"] == tree.root, (code, name)
            assert same(session.stored(change), session.live(name)), (code, name)


DATA_ROUTES: dict[str, tuple[list[str], str, set[str]]] = {
    "an array augmented": (["import numpy as np\na = np.arange(600)"], "a += 1", {"a"}),
    "an array item": (["import numpy as np\na = np.arange(600)"], "a[0] = -5", {"a"}),
    "a ufunc with out=": (
        ["import numpy as np\na = np.arange(600)"],
        "np.add(a, 1, out=a)",
        {"a"},
    ),
    "numpy shuffling a list": (
        [BIG, "import numpy as np"],
        "np.random.default_rng(1).shuffle(nums)",
        {"nums"},
    ),
    "pandas insert in place": (
        ["import pandas as pd\ndf = pd.DataFrame({'x': [1, 2], 'y': [3, 4]})"],
        "df.insert(0, 'k', [5, 6])",
        {"df"},
    ),
    "pandas pop in place": (
        ["import pandas as pd\ndf = pd.DataFrame({'x': [1, 2], 'y': [3, 4]})"],
        "df.pop('y')",
        {"df"},
    ),
    "pandas column set": (
        ["import pandas as pd\ndf = pd.DataFrame({'x': [1, 2], 'y': [3, 4]})"],
        "df['c'] = df['x'] * 2",
        {"df"},
    ),
    "pandas loc set": (
        ["import pandas as pd\ndf = pd.DataFrame({'x': [1, 2], 'y': [3, 4]})"],
        "df.loc[0, 'x'] = 9",
        {"df"},
    ),
    "an object array holding a bound method": (
        [BIG, "import numpy as np\nfs = np.array([nums.append, None], dtype=object)"],
        "fs[0](1)",
        {"nums"},
    ),
}


@pytest.mark.parametrize("case", list(DATA_ROUTES))
def test_data_library_routes_yield_the_right_version(case: str) -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    setup, mutate, expected = DATA_ROUTES[case]
    session = Session(libraries=True)
    for code in setup:
        session.run(code)
    names = sorted(n for n in session.runtime.tracker.state if not n.startswith("_"))
    session.run("\n".join(f"len({name})" for name in names))
    changes = session.run(mutate)
    assert expected <= changes.keys(), (case, sorted(changes))
    for name in expected:
        if changes[name]["kind"] == "value":
            assert same(session.stored(changes[name]), session.live(name)), (case, name)


def test_a_bound_method_held_by_a_data_frame_is_seen_when_its_receiver_is_next_reached() -> None:
    """A library object is not walked: a callable it may hold flags the block, so the next check
    of every tracked value compares it in full."""
    pytest.importorskip("pandas")
    session = Session(libraries=True)
    session.run(BIG)
    session.run("import pandas as pd\ndf = pd.DataFrame({'f': [nums.append]})")
    session.run("len(nums)\nlen(df)")
    session.run("df['f'][0](-1)")
    changes = session.run("len(nums)")
    assert session.live("nums")[-1] == -1
    assert same(session.stored(changes["nums"]), session.live("nums"))
