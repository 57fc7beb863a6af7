"""The server-rendered pages: list, chat view, turn fragment, inspector, variable history."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser

from cove.channels.web.listing import ago, marked
from cove.channels.web.render import markdown, sanitize
from tests.channels.web.conftest import Web
from tests.channels.web.test_api_turns import send_and_finish
from tests.scripted import reply

SPIN = json.dumps({"thinking": "t", "code": [{"code": "while True:\n    pass", "timeout_s": 1}]})

HOSTILE = (
    "Look: <script>alert(1)</script> <img src=x onerror=alert(2)> "
    '[click](javascript:alert(3)) <a href="javascript:alert(4)">raw</a>\n\n'
    "```python\nprint('<b>hi</b>')\n```"
)


def test_markdown_is_rendered_and_sanitised() -> None:
    html = str(markdown(HOSTILE))
    assert "<script" not in html and not re.search(r"<[^>]*onerror", html)
    assert not re.search(r"<a [^>]*javascript", html)
    assert "<img" not in html  # raw HTML is text, not markup
    assert '<span class="nb">print</span>' in html  # highlighted code
    assert "&lt;script&gt;" in html
    # The second layer alone: nh3 strips what markdown-it might ever let through.
    cleaned = sanitize('<a href="javascript:x">y</a><img src=x onerror=alert(1)><script>z</script>')
    assert cleaned == '<a rel="noopener noreferrer">y</a><img src="x">'
    assert str(markdown("**bold** and a [link](https://example.org)")).count("<strong>") == 1


async def test_pages_render_a_conversation(web: Web) -> None:
    replies = [reply(["total = 6 * 7", "total"], HOSTILE, title="Hostile answers")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "compute <b>this</b>")

        home = await client.get("/conversations")
        assert home.status_code == 200 and cid in home.text and "Hostile answers" in home.text
        found = await client.get("/conversations", params={"q": "compute"})
        assert f"/c/{cid}#turn-1" in found.text
        chat = await client.get("/")  # a new chat, beside the sidebar (which fills itself)
        assert 'id="message"' in chat.text and 'id="sidebar-entries"' in chat.text
        side = await client.get("/fragments/sidebar", params={"current": cid})
        assert f'<a href="/c/{cid}" aria-current="page">' in side.text
        side = await client.get("/fragments/sidebar", params={"q": "compute", "current": cid})
        assert f"/c/{cid}#turn-1" in side.text and "<mark>compute</mark>" in side.text
        rows = await client.get("/fragments/list")
        assert rows.status_code == 200 and "<tr" in rows.text

        chat = await client.get(f"/c/{cid}")
        assert chat.status_code == 200
        page = chat.text
        assert "<script>alert" not in page
        assert 'id="turn-1"' in page and "compute &lt;b&gt;this&lt;/b&gt;" in page
        assert not re.search(r"<a [^>]*javascript", page)
        assert '<span class="n">total</span>' in page  # the block's code, highlighted
        assert "→ 42" in page and 'data-name="total"' in page
        assert f'data-after="{events[-1]["id"]}"' in page  # the stream starts after turn 1

        fragment = await client.get(f"/c/{cid}/turns/1")
        assert fragment.text.lstrip().startswith('<article class="turn" id="turn-1"')
        assert (await client.get(f"/c/{cid}/turns/7")).status_code == 404
        assert f'href="/c/{cid}/vars/total#v1">total v1</a>' in fragment.text  # what it wrote

        inspector = await client.get(f"/c/{cid}/inspect/1/1")
        assert inspector.status_code == 200
        assert "Raw reply" in inspector.text and "total = 6 * 7" in inspector.text
        assert "<dt>Cost</dt><dd>unknown</dd>" in inspector.text  # "scripted" has no price
        assert (await client.get(f"/c/{cid}/inspect/1/9")).status_code == 404

        var = await client.get(f"/c/{cid}/vars/total")
        assert var.status_code == 200 and "v1" in var.text and "42" in var.text
        missing = await client.get(f"/c/{cid}/vars/nothing")
        assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
        assert (await client.get("/c/unknown")).status_code == 404
        css = await client.get("/static/pygments.css")
        assert css.status_code == 200 and ".hl" in css.text


def test_table_alignment_is_a_class_not_an_inline_style() -> None:
    html = str(markdown("| n | name | x |\n|--:|:-:|---|\n| 1 | ada | y |"))
    assert "style=" not in html  # the Content-Security-Policy would drop it
    assert html.count('class="align-right"') == 2 and html.count('class="align-center"') == 2
    assert "<th>x</th>" in html
    forged = sanitize(
        '<table><tr><td class="align-right evil" style="color:red">1</td></tr></table>'
    )
    assert '<td class="align-right">1</td>' in forged


async def test_refusals_and_sandbox_restarts_are_on_the_page_after_the_turn_nudges_are_not(
    web: Web,
) -> None:
    replies = [reply(["keep = 1"]), SPIN, reply([], "{{nope}}"), reply([], "{{keep}}")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "spin")
        refused = [e["reason"] for e in events if e["type"] == "answer_refused"]
        hidden = [e["text"] for e in events if e["type"] == "nudge"]
        restarts = [e for e in events if e["type"] == "sandbox_restarted"]
        assert len(refused) == 1 and "nope" in refused[0]
        assert hidden and len(restarts) == 1
        page = (await client.get(f"/c/{cid}")).text
        fragment = (await client.get(f"/c/{cid}/turns/1")).text
    for html in (page, fragment):
        shown = re.findall(r'<p class="error refusal">([^<]*)</p>', html)
        assert [unescape(text) for text in shown] == refused
        assert '<p class="nudge">' not in html  # nudges are for the model alone
        assert not any(text in unescape(html) for text in hidden)
        restart = re.search(
            r'data-iteration="2">.*?<div class="block failed">.*?</div>\s*<p class="restart">'
            r"Sandbox restarted \(([a-z]+)\)",
            html,
            re.S,
        )
        assert restart is not None and restart[1] == restarts[0]["reason"]  # after its block


async def test_a_live_block_is_highlighted_on_request(web: Web) -> None:
    async with web() as client:
        source = 'x = "<script>alert(1)</script>"\nprint(x)'
        done = await client.post("/fragments/highlight", content=source.encode())
        assert done.status_code == 200 and done.headers["content-type"].startswith("text/html")
        assert '<span class="n">x</span>' in done.text and "<script>" not in done.text
        assert unescape(re.sub(r"<[^>]+>", "", done.text)) == source  # the same text, marked up
        too_big = await client.post("/fragments/highlight", content=b"x" * 200_001)
        assert too_big.status_code == 413
        elsewhere = await client.post(
            "/fragments/highlight", content=b"x", headers={"origin": "http://evil.example"}
        )
        assert elsewhere.status_code == 403


async def test_refusal_reasons_and_unknown_costs_on_the_pages(web: Web) -> None:
    refused = "answer refused: undefined placeholder(s) {{x}}"
    replies = [reply(answer="result={{x}}"), reply(["x = 3"], "result={{x}}")]
    async with web(replies) as client:
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        events = await send_and_finish(client, cid, "what is x?")
        [live] = [e for e in events if e["type"] == "answer_refused"]
        assert live["iteration"] == 1 and live["reason"].startswith(refused)
        assert events[-1]["cost_usd"] is None and events[-1]["cost_known"] is False
        fragment = unescape((await client.get(f"/c/{cid}/turns/1")).text)
        inspector = unescape((await client.get(f"/c/{cid}/inspect/1/1")).text)
    first = fragment.split('data-iteration="2"')[0]
    assert refused in first  # under the iteration it belongs to
    assert "$0.0000" not in fragment and "cost unknown" in fragment  # the turn's summary
    assert refused in inspector
    assert "$0.0000" not in inspector and "cost unknown" in inspector  # the turn's totals


def test_a_search_passage_is_cut_into_plain_parts_and_matches() -> None:
    text = "primes = primes + [31]"
    assert marked(text, ((0, 6), (9, 15))) == [
        ("primes", True),
        (" = ", False),
        ("primes", True),
        (" + [31]", False),
    ]
    assert marked("abc", ()) == [("abc", False)]
    assert marked("abcdef", ((2, 5), (3, 4))) == [("ab", False), ("cde", True), ("f", False)]


def test_the_sidebar_says_how_long_ago_in_the_largest_whole_unit() -> None:
    now = 1_000_000.0
    assert [ago(now - s, now) for s in (5, 59, 60, 7_199, 7_200, 3 * 86_400)] == [
        "now",
        "now",
        "1 min",
        "1 h",
        "2 h",
        "3 d",
    ]
    assert ago(None, now) == "" and ago(now + 30, now) == "now"  # a clock a little ahead


class _Tree(HTMLParser):
    """The branch tree of a chat page: (depth, conversation id, current) in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.inside, self.found = 0, False, list[tuple[int, str, bool]]()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "ul" and (self.inside or found.get("class") == "branch-tree"):
            self.inside, self.depth = True, self.depth + 1
        elif tag == "a" and self.inside:
            branch = found["data-branch"] or ""
            self.found.append((self.depth, branch, found.get("aria-current") == "page"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul" and self.inside:
            self.depth -= 1
            self.inside = self.depth > 0


def branch_tree(page: str) -> list[tuple[int, str, bool]]:
    parser = _Tree()
    parser.feed(page)
    return parser.found


SWITCH = re.compile(
    r'<nav class="turn-versions" aria-label="Versions of turn (\d+)">(.*?)</nav>', re.S
)


def switches(page: str) -> dict[int, tuple[str, str | None, str | None]]:
    """Turn → ("2/3", the previous version's conversation, the next one's) of a page."""
    found = {}
    for position, body in SWITCH.findall(page):
        count = re.search(r"version (\d+) of (\d+)", body)
        assert count is not None
        steps = dict(re.findall(r'data-step="(\w+)" data-branch="(\w+)"', body))
        found[int(position)] = (f"{count[1]}/{count[2]}", steps.get("previous"), steps.get("next"))
    return found


async def test_every_page_of_a_fork_tree_places_each_turn_among_its_versions(web: Web) -> None:
    replies = [reply([], f"answer {n}") for n in range(9)]
    async with web(replies) as client:

        async def fork(cid: str, turn: int, request: str | None = None) -> str:
            body = {"turn": turn} | ({"request": request} if request else {})
            made = await client.post(f"/api/conversations/{cid}/fork", json=body)
            assert made.status_code == 201, made.text
            if request:
                await send_and_finish(client, made.json()["id"], request)
            return str(made.json()["id"])

        root = (await client.post("/api/conversations", json={"title": "Root"})).json()["id"]
        for request in ("ask <b>once</b>", "two", "three"):
            await send_and_finish(client, root, request)
        retry = await fork(root, 1, "two")  # turn 2 again
        await send_and_finish(client, retry, "three, after the retry")
        deeper = await fork(retry, 2)  # a branch of the retry, then its own turn 3
        await send_and_finish(client, deeper, "three, in the branch")
        edit = await fork(deeper, 1, "two, edited")  # an edit of turn 2 from a branch of a branch
        first = await fork(root, 0, "ask <i>twice</i>")  # turn 1 again, differently

        pages = {cid: (await client.get(f"/c/{cid}")).text for cid in (root, retry, deeper, edit)}
        pages[first] = (await client.get(f"/c/{first}")).text
        # Turn 1: the original's and the first turn's edit; turn 2: the original's, the retry's
        # and the edit's, whichever page shows them; turn 3 after the retry's turn 2: the
        # retry's and its branch's. The original's turn 3 has no other version.
        assert switches(pages[root]) == {1: ("1/2", None, first), 2: ("1/3", None, retry)}
        assert switches(pages[retry]) == {
            1: ("1/2", None, first),
            2: ("2/3", root, edit),
            3: ("1/2", None, deeper),
        }
        assert switches(pages[deeper]) == {
            1: ("1/2", None, first),
            2: ("2/3", root, edit),
            3: ("2/2", retry, None),
        }
        assert switches(pages[edit]) == {1: ("1/2", None, first), 2: ("3/3", retry, None)}
        assert switches(pages[first]) == {1: ("2/2", root, None)}
        # A version is named by what it asked, escaped as any text.
        assert "Previous version, 1 of 2: “ask &lt;b&gt;once&lt;/b&gt;”" in pages[first]
        assert "Next version, 2 of 2: “ask &lt;i&gt;twice&lt;/i&gt;”" in pages[root]
        # The original's turn 2 seen from a branch of the retry: read from the original.
        assert "Previous version, 1 of 3: “two”" in pages[deeper]
        assert "Next version, 3 of 3: “two, edited”" in pages[deeper]
        fragment = (await client.get(f"/c/{edit}/turns/2")).text  # a turn as it ends
        assert switches(fragment) == {2: ("3/3", retry, None)}

        # Each page lists the whole tree, nested as it was forked, itself marked.
        for cid, page in pages.items():
            assert branch_tree(page) == [
                (1, root, cid == root),
                (2, retry, cid == retry),
                (3, deeper, cid == deeper),
                (4, edit, cid == edit),
                (2, first, cid == first),
            ]
            assert "All branches (5)" in page
        note = re.search(r'<p class="fork-note">(.*?)</p>', pages[first], re.S)
        assert note and f'href="/c/{root}"' in note[1] and "before its first turn" in note[1]
        assert 'class="fork-note"' not in pages[root]
        alone = (await client.post("/api/conversations", json={})).json()["id"]
        assert 'id="branches"' not in (await client.get(f"/c/{alone}")).text
