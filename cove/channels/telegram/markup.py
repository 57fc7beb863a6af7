"""Answers as Telegram messages: Markdown to Telegram's HTML subset, and long texts split.

Telegram takes at most 4096 characters of text per message and a small set of HTML tags.
``split_text`` cuts a Markdown text into pieces under the limit on paragraph boundaries, never
inside a fenced code block unless the block alone is too long (then it is cut on lines and each
piece is fenced again), and never right after a lead-in ("The value is", "Here it is:"), which
goes on with the start of what it introduces. ``to_html`` renders one piece; whatever the model
wrote is escaped, so the only tags are the ones made here. The plain piece is the fallback when
Telegram still refuses the formatting.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator, Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

#: Characters per message piece; under Telegram's 4096 with room for a "(2/3)" marker.
PIECE_CHARS = 4000
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SAFE_LINK = re.compile(r"^(https?|tg|mailto):", re.IGNORECASE)
_PRE = re.compile(r"(<pre>.*?</pre>)", re.DOTALL)
_md = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")


# -- splitting ---------------------------------------------------------------------------------


def _blocks(text: str) -> Iterator[str]:
    """Paragraphs and whole fenced code blocks, in order."""
    current: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is None and marker:
            if current:
                yield "\n".join(current)
            current, fence = [line], marker.group(1)[0] * 3
            continue
        current.append(line)
        if fence is not None:
            if line.strip().startswith(fence) and len(current) > 1:
                yield "\n".join(current)
                current, fence = [], None
        elif not line.strip():
            current.pop()
            if current:
                yield "\n".join(current)
            current = []
    if current:
        yield "\n".join(current)


#: A short prose line that does not end a sentence ("The value is", "Here are the rows:") leads
#: into what follows it and is never left alone at the end of a piece.
LEAD_CHARS = 160
_SENTENCE_END = (".", "!", "?", '"', "'", ")", "`", "*", "_")


def _is_lead(unit: str, limit: int) -> bool:
    stripped = unit.strip()
    return (
        0 < len(stripped) <= min(LEAD_CHARS, limit // 4)
        and "\n" not in stripped
        and not _FENCE.match(stripped)
        and not stripped.endswith(_SENTENCE_END)
    )


def _leads(held: list[str], glue: str, limit: int) -> list[str]:
    """Take the lead-ins that end ``held`` off it, to go on with what follows them: all of
    ``held`` when it holds nothing else (and leaves a quarter of a piece), else at most half a
    piece of them. So no piece is a lone lead-in."""
    count = 0
    while count < len(held) and _is_lead(held[-1 - count], limit):
        count += 1
    if count == len(held) and len(glue.join(held)) <= limit * 3 // 4:
        taken = held[:]
        held.clear()
        return taken
    taken = []
    while count and len(glue.join([held[-1], *taken])) <= limit // 2:
        taken.insert(0, held.pop())
        count -= 1
    return taken


def _cut_block(block: str, first: int, limit: int) -> list[str]:
    """A block over ``first`` characters: the first piece at most ``first``, the rest at most
    ``limit``. Fenced code is cut on lines (each piece fenced again), prose on lines, then
    words, then characters."""
    lines = block.split("\n")
    marker = _FENCE.match(lines[0])
    opener = lines[0]
    frame = len(opener) + 5  # the opener, a closing fence and two line breaks
    if not marker or frame * 2 > min(first, limit):
        return _cut_prose(block, first, limit)
    closer = marker.group(1)[0] * 3
    body = lines[1:-1] if len(lines) > 1 and lines[-1].strip().startswith(closer) else lines[1:]
    pieces = _pack(body, limit - frame, "\n", _cut_prose, first=first - frame, leads=False)
    return [f"{opener}\n{piece}\n{closer}" for piece in pieces]


def _cut_prose(text: str, first: int, limit: int) -> list[str]:
    if "\n" in text:
        return _pack(text.split("\n"), limit, "\n", _cut_prose, first=first, leads=True)
    if " " in text.strip():
        return _pack(text.split(" "), limit, " ", _cut_prose, first=first, leads=False)
    return [text[:first], *(text[i : i + limit] for i in range(first, len(text), limit))]


def _pack(
    parts: Sequence[str],
    limit: int,
    glue: str,
    cut: Callable[[str, int, int], list[str]],
    *,
    first: int | None = None,
    leads: bool = True,
) -> list[str]:
    """Join ``parts`` greedily into pieces of at most ``limit`` characters (``first`` for the
    first piece); a part too long for the room left is ``cut(part, room, limit)``. With
    ``leads``, a lead-in (``_is_lead``) that would end a piece moves on to the next one, with
    the start of what follows it."""
    pieces: list[str] = []
    held: list[str] = []  # the parts of the piece being filled
    room = limit if first is None else max(1, first)
    for part in parts:
        if len(glue.join([*held, part])) <= room:
            held.append(part)
            continue
        carried = _leads(held, glue, limit) if leads else []
        if held:
            pieces.append(glue.join(held))
            room = limit
        held = carried
        left = room - len(glue.join([*held, ""])) if held else room
        if len(part) <= left:
            held.append(part)
            continue
        head, *rest = cut(part, max(1, left), limit)
        held.append(head)
        for chunk in rest:
            pieces.append(glue.join(held))
            room, held = limit, [chunk]
    if held:
        pieces.append(glue.join(held))
    return pieces


def split_text(text: str, limit: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters on paragraph/code boundaries.

    A block too long for one piece is cut (code on lines, fenced again in every piece); a short
    lead-in line ("The value is") is kept with the start of what follows it.
    """
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    return _pack(list(_blocks(text)), limit, "\n\n", _cut_block)


# -- rendering ---------------------------------------------------------------------------------


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


class _Renderer:
    """Walks markdown-it tokens and writes Telegram HTML."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.lists: list[int | None] = []  # None: bullets; else the next number
        self.links: list[bool] = []  # whether each open link was written as <a>

    def block(self, tok: Token) -> None:
        handler = _BLOCK.get(tok.type)
        if handler is not None:
            handler(self, tok)

    def inline(self, children: Sequence[Token]) -> None:
        for tok in children:
            handler = _INLINE.get(tok.type)
            if handler is not None:
                handler(self, tok)

    def paragraph_close(self, tok: Token) -> None:
        self.out.append("\n" if tok.hidden else "\n\n")

    def code(self, tok: Token) -> None:
        lang = (tok.info or "").strip().split(" ")[0]
        attr = f' class="language-{html.escape(lang, quote=True)}"' if lang else ""
        body = _escape(tok.content.rstrip("\n"))
        self.out.append(f"<pre><code{attr}>{body}</code></pre>\n\n")

    def list_open(self, tok: Token) -> None:
        start = tok.attrGet("start") if tok.type == "ordered_list_open" else None
        self.lists.append(None if tok.type == "bullet_list_open" else int(start or 1))

    def list_close(self, tok: Token) -> None:
        self.lists.pop()
        if not self.lists:
            self.out.append("\n")

    def quote_close(self, tok: Token) -> None:
        while self.out and self.out[-1].endswith("\n"):
            last = self.out.pop().rstrip("\n")
            if last:
                self.out.append(last)
                break
        self.out.append("</blockquote>\n\n")

    def item_open(self, tok: Token) -> None:
        number = self.lists[-1] if self.lists else None
        marker = "•" if number is None else f"{number}."
        if number is not None:
            self.lists[-1] = number + 1
        self.out.append("  " * (len(self.lists) - 1) + marker + " ")

    def link_open(self, tok: Token) -> None:
        href = str(tok.attrGet("href") or "")
        safe = bool(_SAFE_LINK.match(href))
        self.links.append(safe)
        if safe:
            self.out.append(f'<a href="{html.escape(href, quote=True)}">')

    def link_close(self, tok: Token) -> None:
        if self.links and self.links.pop():
            self.out.append("</a>")


def _put(text: str) -> Callable[[_Renderer, Token], None]:
    return lambda r, tok: r.out.append(text)


_BLOCK: dict[str, Callable[[_Renderer, Token], None]] = {
    "inline": lambda r, tok: r.inline(tok.children or ()),
    "paragraph_close": _Renderer.paragraph_close,
    "heading_open": _put("<b>"),
    "heading_close": _put("</b>\n\n"),
    "fence": _Renderer.code,
    "code_block": _Renderer.code,
    "bullet_list_open": _Renderer.list_open,
    "ordered_list_open": _Renderer.list_open,
    "bullet_list_close": _Renderer.list_close,
    "ordered_list_close": _Renderer.list_close,
    "list_item_open": _Renderer.item_open,
    "blockquote_open": _put("<blockquote>"),
    "blockquote_close": _Renderer.quote_close,
    "hr": _put("———\n\n"),
}
_INLINE: dict[str, Callable[[_Renderer, Token], None]] = {
    "text": lambda r, tok: r.out.append(_escape(tok.content)),
    "softbreak": _put("\n"),
    "hardbreak": _put("\n"),
    "code_inline": lambda r, tok: r.out.append(f"<code>{_escape(tok.content)}</code>"),
    "strong_open": _put("<b>"),
    "strong_close": _put("</b>"),
    "em_open": _put("<i>"),
    "em_close": _put("</i>"),
    "s_open": _put("<s>"),
    "s_close": _put("</s>"),
    "link_open": _Renderer.link_open,
    "link_close": _Renderer.link_close,
    "image": lambda r, tok: r.out.append(_escape(tok.content or "[image]")),
}


def to_html(markdown: str) -> str:
    """One piece of Markdown as Telegram HTML (every character of the input escaped)."""
    renderer = _Renderer()
    for tok in _md.parse(markdown):
        renderer.block(tok)
    parts = _PRE.split("".join(renderer.out))  # blank lines inside code blocks stay
    rendered = "".join(
        part if i % 2 else re.sub(r"\n{3,}", "\n\n", part) for i, part in enumerate(parts)
    ).strip()
    return rendered or _escape(markdown.strip())
