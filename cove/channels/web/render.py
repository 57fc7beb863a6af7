"""Model output as safe HTML: Markdown (markdown-it-py), highlighted code (pygments), sanitised.

Everything a model or the sandbox wrote is hostile. Raw HTML in Markdown is not interpreted
(``html`` off), links with unsafe schemes are refused by markdown-it, and the result still goes
through ``nh3`` with a short allow-list, so a bug in one layer is caught by the next.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span",
    "div", "del", "img",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "span": {"class"},
    "div": {"class"},
    "pre": {"class"},
    "code": {"class"},
}
#: Table cell alignment travels as a class: the Content-Security-Policy refuses inline styles.
_ALIGNS = ("left", "center", "right")
_CLASSES = {cell: {f"align-{a}" for a in _ALIGNS} for cell in ("th", "td")}
_SCHEMES = {"http", "https", "mailto"}
_FORMATTER = HtmlFormatter(cssclass="hl", wrapcode=True)
_INLINE = HtmlFormatter(nowrap=True)  # markdown-it wraps it in <pre><code>


def _highlight(code: str, lang: str, _attrs: object) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else PythonLexer()
    except ClassNotFound:
        lexer = PythonLexer()
    return str(highlight(code, lexer, _INLINE))


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight})
    md.enable("table")
    md.enable("strikethrough")
    md.core.ruler.push("align_classes", _align_classes)
    return md


def _align_classes(state: StateCore) -> None:
    """``style="text-align:right"`` on table cells becomes ``class="align-right"``."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = str(token.attrs.pop("style", ""))
            align = style.removeprefix("text-align:").strip()
            if align in _ALIGNS:
                token.attrSet("class", f"align-{align}")


def sanitize(html: str) -> str:
    """``html`` reduced to the allow-listed tags, attributes and URL schemes."""
    return str(
        nh3.clean(
            html,
            tags=_TAGS,
            clean_content_tags={"script", "style"},
            attributes=_ATTRIBUTES,
            allowed_classes=_CLASSES,
            url_schemes=_SCHEMES,
        )
    )


#: Rendering is most of a page's time and pages show the same turns again and again: results
#: for texts up to this size are kept (at most ``CACHED`` of each kind), bounding the memory.
CACHED_CHARS = 4096
CACHED = 1024


def _cached(render: Callable[[str], str]) -> Callable[[str], str]:
    kept = lru_cache(maxsize=CACHED)(render)

    def cached(text: str) -> str:
        return kept(text) if len(text) <= CACHED_CHARS else render(text)

    return cached


@_cached
def _markdown_html(text: str) -> str:
    # The "hl" class scopes pygments' token colours to the answer's code blocks.
    return f'<div class="md hl">{sanitize(_markdown().render(text))}</div>'


@_cached
def _code_html(text: str) -> str:
    return sanitize(highlight(text, PythonLexer(), _FORMATTER))


def markdown(text: str | None) -> Markup:
    """Untrusted Markdown as sanitised HTML, ready for a template."""
    return Markup(_markdown_html(text) if text else "")


def code(text: str) -> Markup:
    """Python source, highlighted (pygments escapes everything it emits)."""
    return Markup(_code_html(text))


@_cached  # every page watching a turn asks for the same blocks
def code_spans(text: str) -> str:
    """Python source as highlighted spans without a wrapper, for a live block's ``<pre>``."""
    spans = sanitize(highlight(text, PythonLexer(), _INLINE))
    return spans if text.endswith("\n") else spans.removesuffix("\n")  # pygments adds one


def diff(old: str, new: str) -> str:
    """A unified diff of two variable previews (plain text; templates escape it)."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=2
    )
    return "\n".join(lines)


def pygments_css() -> str:
    """Stylesheet for highlighted code: light by default, dark with the system's dark mode."""
    light = HtmlFormatter(style="default").get_style_defs(".hl")
    dark = HtmlFormatter(style="monokai").get_style_defs(".hl")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"
