"""Splitting long answers and rendering Markdown to Telegram's HTML."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cove.channels.telegram.markup import split_text, to_html
from tests.fakes.telegram_server import parsed_text


def test_a_long_answer_splits_on_paragraphs_and_keeps_code_blocks_whole() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 150 for i in range(12)]
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(200)) + "\n```"
    text = "\n\n".join([*paragraphs[:6], code, *paragraphs[6:]])
    pieces = split_text(text)
    assert len(text) > 10_000 and len(pieces) >= 3
    assert all(len(p) <= 4000 for p in pieces)
    assert [p for p in pieces if code in p]  # the code block was not cut
    for paragraph in paragraphs:
        assert sum(paragraph.strip() in p for p in pieces) == 1


def test_a_code_block_too_long_for_one_message_is_fenced_again_in_each_piece() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(1500)) + "\n```"
    pieces = split_text(code)
    assert len(pieces) >= 3
    for piece in pieces:
        assert piece.startswith("```") and piece.endswith("```") and len(piece) <= 4000
    lines = [ln for p in pieces for ln in p.splitlines() if ln.startswith("line ")]
    assert lines == [f"line {i}" for i in range(1500)]


def test_markdown_renders_to_the_tags_telegram_knows_and_escapes_the_rest() -> None:
    html = to_html(
        "# Title\n\n**bold** _it_ `a<b>` [site](https://x.org/?a=1&b=2) <script>x</script>\n\n"
        "- one\n- two\n\n```python\nif a < b:\n\n    pass\n```"
    )
    assert "<b>Title</b>" in html and "<b>bold</b>" in html and "<i>it</i>" in html
    assert "<code>a&lt;b&gt;</code>" in html
    assert '<a href="https://x.org/?a=1&amp;b=2">site</a>' in html
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "• one\n• two" in html
    assert '<pre><code class="language-python">if a &lt; b:\n\n    pass</code></pre>' in html
    assert parsed_text(html, "HTML")[1] is None


@given(st.text(max_size=600))
def test_any_text_renders_to_html_telegram_accepts(text: str) -> None:
    for piece in split_text(text, limit=200):
        assert len(piece) <= 200
        _shown, problem = parsed_text(to_html(piece), "HTML")
        assert problem is None


LEAD_WORDS = st.text(alphabet="abcdefghij ", min_size=1, max_size=40).filter(str.strip)
LONG_BODIES = st.one_of(
    st.integers(300, 700).map(lambda n: "7" * n),  # one word longer than a piece
    st.integers(30, 90).map(lambda n: " ".join(["word"] * n)),  # a long paragraph
    st.integers(30, 90).map(lambda n: "```\n" + "\n".join(["x = 1"] * n) + "\n```"),
    st.integers(8, 20).map(lambda n: "\n".join(["- item"] * n) + "\n" + "y" * 150),
)


@given(LEAD_WORDS, st.sampled_from(["\n", "\n\n", ":\n", ":\n\n"]), LONG_BODIES)
def test_a_lead_in_is_never_a_piece_of_its_own(lead: str, gap: str, body: str) -> None:
    """ "The value is" before something too long for its piece goes on with that thing."""
    text = "Some words first. " * 4 + "\n\n" + lead.strip() + gap + body
    pieces = split_text(text, limit=200)
    assert all(len(p) <= 200 for p in pieces)
    holding = [p for p in pieces if lead.strip() + gap.rstrip("\n") in p]
    assert holding, pieces
    assert holding[0].rstrip().endswith(lead.strip() + gap.rstrip("\n")) is False, pieces
    assert "".join(pieces).replace("\n", "").replace(" ", "").replace("`", "") == (
        text.replace("\n", "").replace(" ", "").replace("`", "")
    )


@given(st.lists(st.one_of(LEAD_WORDS, st.text(max_size=300), LONG_BODIES), max_size=12))
def test_no_piece_but_the_last_is_only_a_lead_in(paragraphs: list[str]) -> None:
    """A short line that ends no sentence (nor a quote, a bracket or an emphasis) leads in."""
    pieces = split_text("\n\n".join(paragraphs), limit=200)
    for piece in pieces[:-1]:
        stripped = piece.strip()
        lone_line = "\n" not in stripped and len(stripped) <= 50
        assert not (lone_line and not stripped.endswith(tuple(".!?\"')`*_"))), pieces
