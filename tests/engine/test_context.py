"""The O(1) context: every section keeps to its budget, visibly, whatever came before."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cove.engine import budgets as b
from cove.engine.context import (
    JOURNAL_ITERATIONS,
    Handover,
    JournalEntry,
    context_message,
    cut,
    request_message,
    system_prompt,
)
from cove.engine.prompt import CORE_INSTRUCTIONS
from cove.environment.var_index import VarEntry
from cove.results import BlockResult, VarVersion

CUT = re.compile(r"…\[cut ([\d,]+) chars")


def entry(ref: str = "t1.i1.1", **changes: object) -> JournalEntry:
    fields: dict[str, object] = {
        "position": 0,
        "code": "x = 1\nx",
        "ok": True,
        "result": "1",
        "stdout": "",
        "stderr": "",
        "error": None,
        "duration_ms": 3.0,
    }
    fields.update(changes)
    fields["result_preview"] = fields.pop("result")
    return JournalEntry(ref, BlockResult(**fields))  # type: ignore[arg-type]


def var(name: str, seq: int, **changes: object) -> VarEntry:
    fields: dict[str, object] = {
        "name": name,
        "version": 1,
        "kind": "value",
        "encoded": None,
        "type_name": "int",
        "size": None,
        "preview": "1",
    }
    fields.update(changes)
    return VarEntry(VarVersion(**fields), updated_seq=seq)  # type: ignore[arg-type]


def context(**changes: object) -> str:
    args: dict[str, object] = {
        "iteration": 1,
        "budget": 10,
        "prior_thinking": None,
        "journal": (),
        "var_index": (),
        "nudges": (),
    }
    args.update(changes)
    return context_message(**args)  # type: ignore[arg-type]


def section(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    assert match, f"no <{tag}> section in {text!r}"
    return match.group(0)


# --- cut ---------------------------------------------------------------------------------------


def test_cut_leaves_short_text_alone() -> None:
    assert cut("hello", 5, "see history()") == "hello"


def test_cut_marks_how_much_was_removed_and_where_to_look() -> None:
    text = "z" * 10_000
    shown = cut(text, 200, "see history()")
    assert len(shown) <= 200
    assert shown.startswith("z" * 50)
    removed = int(CUT.search(shown).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert removed == 10_000 - shown.count("z")
    assert shown.endswith("; see history()]")


def test_cut_can_keep_the_end() -> None:
    shown = cut("head " + "x" * 5_000 + " tail", 300, "h", keep_tail=True)
    assert shown.startswith("head ") and shown.endswith(" tail")
    assert len(shown) <= 300


def test_cut_with_a_limit_smaller_than_the_marker_still_fits() -> None:
    assert len(cut("z" * 1_000, 5, "a long hint")) == 5


# --- system prompt -----------------------------------------------------------------------------


def test_system_prompt_teaches_the_protocol() -> None:
    text = system_prompt("## core\nhistory(n=10): recent blocks")
    for needle in (
        '"thinking"',
        '"code"',
        '"answer"',
        '"confidence"',
        '"title"',
        '"next_reasoning"',
        "timeout_s",
        "RestrictedPython",
        "hashlib",
        "trailing expression",
        "{{total}}",
        "refused",
        "REQUEST",
        "LAST_ANSWER",
        "var_history(name)",
        "shape(value)",
        "request_more_iterations(n)",
        "llm_query(prompt)",
        "[t2.i3.1]",
        "history(n=10): recent blocks",
    ):
        assert needle in text, needle


def test_system_prompt_is_deterministic_and_has_no_timestamps() -> None:
    assert system_prompt("docs") == system_prompt("docs")
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}", system_prompt("docs"))


def test_system_prompt_is_bounded_even_with_huge_extension_docs() -> None:
    assert len(CORE_INSTRUCTIONS) <= b.SYSTEM_CORE_CHARS - 64
    text = system_prompt("doc line\n" * 100_000)
    assert len(text) <= b.SYSTEM_CHARS
    assert "extension documentation cut to fit" in text


def test_system_prompt_without_extensions_says_so() -> None:
    assert "(no extensions are active)" in system_prompt("  ")


# --- request message ---------------------------------------------------------------------------


def test_request_alone_is_the_request_text() -> None:
    assert request_message("How many primes below 100?", None) == "How many primes below 100?"


def test_huge_request_is_cut_with_a_pointer_to_REQUEST() -> None:
    text = request_message("data " * 100_000, None)
    assert len(text) <= b.REQUEST_CHARS
    assert "the full request is in REQUEST" in text


def test_handover_shows_previous_request_answer_and_thinking() -> None:
    text = request_message("And the squares?", Handover("Sum the primes", "It is 1060.", "sieve"))
    assert "<previous_turn>" in text and "Sum the primes" in text
    assert "It is 1060." in text and "sieve" in text
    assert text.endswith("<request>\nAnd the squares?\n</request>")


def test_handover_is_bounded_however_long_the_previous_turn() -> None:
    huge = Handover("r" * 50_000, "a" * 500_000, "t" * 80_000)
    text = request_message("q" * 90_000, huge)
    assert len(text) <= b.REQUEST_MESSAGE_CHARS
    assert "the full answer is in LAST_ANSWER" in text
    assert "the full request is in REQUEST" in text
    assert len(CUT.findall(text)) == 4


def test_handover_without_answer_or_thinking() -> None:
    text = request_message("next", Handover("before", None, None))
    assert "ended without an answer" in text
    assert "<last_thinking>" not in text


# --- context message ---------------------------------------------------------------------------


def test_empty_context_shows_header_and_empty_sections() -> None:
    text = context(iteration=1, budget=10)
    assert text.startswith("[iteration 1/10]")
    assert "(no blocks yet)" in text and "(no variables yet)" in text
    assert "<prior_thinking>" not in text and "[nudge]" not in text


def test_prior_thinking_is_bounded() -> None:
    text = context(prior_thinking="because " * 10_000)
    part = section(text, "prior_thinking")
    assert len(part) <= b.PRIOR_THINKING_CHARS
    assert CUT.search(part)


def test_journal_entry_shows_code_result_output_and_error() -> None:
    text = context(
        journal=[
            entry("t1.i1.1", code="total = 4\ntotal", result="4", stdout="hi\n"),
            entry("t1.i1.2", ok=False, result=None, stderr="warn", error="NameError: y"),
            entry("t1.i2.1", duration_ms=4_210.0),
            entry("t1.i2.2", ok=False, result=None, timed_out=True, duration_ms=10_000.0),
        ]
    )
    journal = section(text, "journal")
    assert "[t1.i1.1] ok\n```python\ntotal = 4\ntotal\n```\n=> 4\nstdout: hi" in journal
    assert "[t1.i1.2] failed" in journal and "stderr: warn" in journal
    assert "error: NameError: y" in journal
    assert "[t1.i2.1] ok (slow: 4,210 ms)" in journal
    assert "[t1.i2.2] timed out after 10,000 ms" in journal
    assert journal.index("t1.i1.1") < journal.index("t1.i2.2")  # oldest first


def test_each_journal_value_is_cut_with_a_marker() -> None:
    huge = entry(code="c" * 9_000, result="r" * 9_000, stdout="o" * 9_000, stderr="e" * 9_000,
                 error="E" * 9_000, ok=False)  # fmt: skip
    journal = section(context(journal=[huge]), "journal")
    assert len(CUT.findall(journal)) == 5
    assert "c" * (b.BLOCK_CODE_CHARS + 1) not in journal
    assert len(journal) <= b.JOURNAL_CHARS


def test_journal_keeps_newest_blocks_and_says_how_many_are_left_out() -> None:
    blocks = [entry(f"t1.i{i}.1", stdout=f"{i}" * 5_000) for i in range(1, 31)]
    journal = section(context(journal=blocks), "journal")
    assert len(journal) <= b.JOURNAL_CHARS
    assert "[t1.i30.1]" in journal and "[t1.i1.1]" not in journal
    shown = len(re.findall(r"^\[t1\.i\d+\.1\]", journal, re.M))
    assert f"… {30 - shown} earlier blocks are not shown; history() returns them" in journal
    # The newest block is shown in full form, older ones may be squeezed to the compact form.
    newest = journal[journal.index("[t1.i30.1]") :]
    assert len(newest) > b.BLOCK_STDOUT_CHARS - 100


def test_var_index_lists_most_recent_first_with_type_size_and_preview() -> None:
    text = context(
        var_index=[
            var("old", 1),
            var("rows", 3, type_name="list", size=1_200, preview="[1, 2,\n 3]", version=4),
            var("note", 2, type_name="str", size=12, preview="'hello world!'"),
            var(
                "parse", 5, kind="function", type_name="function", signature="parse(line, sep=',')"
            ),
            var("gen", 4, kind="opaque", type_name="generator", preview="<generator>"),
        ]
    )
    lines = section(text, "var_index").splitlines()[1:-1]
    assert lines == [
        "parse v1 function parse(line, sep=',')",
        "gen v1 generator = <generator> [opaque: not saved, lost if the sandbox restarts]",
        "rows v4 list(1,200 items) = [1, 2, 3]",
        "note v1 str(12 chars) = 'hello world!'",
        "old v1 int = 1",
    ]


def test_var_index_overflow_line_counts_the_rest_and_says_how_to_reach_them() -> None:
    variables = [var(f"v{i}", i) for i in range(500)]
    index = section(context(var_index=variables), "var_index")
    rows = index.splitlines()[1:-2]
    assert len(rows) == b.VAR_INDEX_ROWS
    assert rows[0].startswith("v499 ")
    assert f"… {500 - b.VAR_INDEX_ROWS} more variables, written earlier" in index
    assert "var_history(" in index and "shape(" in index


def test_var_index_of_only_the_recent_entries_counts_the_rest_from_var_count() -> None:
    variables = [var(f"v{i}", i) for i in range(500)]
    recent = variables[-b.VAR_INDEX_ROWS :]
    assert context(var_index=recent, var_count=500) == context(var_index=variables)


def test_var_index_previews_are_one_bounded_line() -> None:
    variables = [var("x" * 500, 1, type_name="T" * 500, preview="line\n" * 10_000)]
    index = section(context(var_index=variables), "var_index")
    row = index.splitlines()[1]
    assert len(row) < b.VAR_NAME_CHARS + b.VAR_TYPE_CHARS + b.VAR_PREVIEW_CHARS + 40
    assert row.endswith("…")


def test_nudges_are_capped_in_count_and_length() -> None:
    text = context(nudges=[f"nudge {i} " + "n" * 1_000 for i in range(20)])
    lines = [line for line in text.splitlines() if line.startswith("[nudge]")]
    assert len(lines) == b.MAX_NUDGES
    assert all(len(line) <= b.NUDGE_CHARS + 8 for line in lines)
    assert lines[0].startswith("[nudge] nudge 0 ")


def test_context_is_deterministic() -> None:
    args = {
        "journal": [entry(stdout="x" * 3_000)],
        "var_index": [var("a", 2), var("b", 2), var("c", 1)],
        "nudges": ["n"],
        "prior_thinking": "t",
    }
    assert context(**args) == context(**args)


# --- the O(1) guarantee -----------------------------------------------------------------------


HUGE = "[" + ", ".join(str(j) for j in range(3_000)) + "]"


def synthetic_prompt(iteration: int) -> int:
    """Prompt size at ``iteration`` of a run where every block produced huge values."""
    blocks_per_iteration = 3
    journal = [
        entry(
            f"t1.i{i}.{k}",
            code=f"v{i}_{k} = build({i})\n" + "#" * (2_000 + 97 * i),
            result="r" * (5_000 + 13 * i),
            stdout="o" * 50_000,
            stderr="e" * 3_000,
            error=None if k != 2 else "ValueError: " + "x" * 4_000,
            ok=k != 2,
            duration_ms=1_500.0 * k,
        )
        for i in range(max(1, iteration - JOURNAL_ITERATIONS), iteration)
        for k in range(1, blocks_per_iteration + 1)
    ]
    variables = [
        var(f"value_{n}_" + "n" * 60, n, version=n, type_name="list", size=10**6, preview=HUGE)
        for n in range(iteration * 5)
    ]
    ctx = context_message(
        iteration=iteration,
        budget=200,
        prior_thinking="thinking " * 5_000,
        journal=journal,
        var_index=variables,
        nudges=["Your answer was refused: " + "y" * 2_000] * 9,
    )
    assert len(ctx) <= b.CONTEXT_CHARS
    request = request_message("please " * 20_000, Handover("p" * 9_000, "a" * 9_000, "t" * 9_000))
    total = len(system_prompt("doc " * 3_000)) + len(request) + len(ctx)
    assert total <= b.PROMPT_CHARS
    return total


@pytest.mark.slow
def test_prompt_of_iteration_200_is_bounded_and_does_not_grow() -> None:
    sizes = {n: synthetic_prompt(n) for n in range(1, 201)}
    assert max(sizes.values()) <= b.PROMPT_CHARS
    assert sizes[200] <= 1.2 * sizes[10]


text_values = st.text(max_size=3_000)


@settings(max_examples=60, deadline=None)
@given(
    journal=st.lists(
        st.builds(
            JournalEntry,
            ref=st.text(max_size=80),
            block=st.builds(
                BlockResult,
                position=st.just(0),
                code=text_values,
                ok=st.booleans(),
                result_preview=st.none() | text_values,
                stdout=text_values,
                stderr=text_values,
                error=st.none() | text_values,
                duration_ms=st.floats(0, 1e7),
                timed_out=st.booleans(),
            ),
        ),
        max_size=25,
    ),
    variables=st.lists(
        st.builds(
            VarEntry,
            var=st.builds(
                VarVersion,
                name=st.text(min_size=1, max_size=200),
                version=st.integers(1, 10**9),
                kind=st.sampled_from(["value", "function", "opaque"]),
                encoded=st.none(),
                type_name=st.text(max_size=100),
                size=st.none() | st.integers(0, 10**12),
                preview=text_values,
                signature=st.none() | text_values,
            ),
            updated_seq=st.integers(0, 10**9),
        ),
        max_size=60,
    ),
    thinking=st.none() | st.text(max_size=5_000),
    nudges=st.lists(st.text(max_size=600), max_size=12),
)
def test_context_never_exceeds_its_ceiling(
    journal: list[JournalEntry],
    variables: list[VarEntry],
    thinking: str | None,
    nudges: list[str],
) -> None:
    text = context_message(
        iteration=10**6,
        budget=10**6,
        prior_thinking=thinking,
        journal=journal,
        var_index=variables,
        nudges=nudges,
    )
    assert len(text) <= b.CONTEXT_CHARS


def test_the_request_message_announces_attached_files_within_its_budget() -> None:
    text = request_message("Which month sold most?", None, [("sales.csv", 12_345)])
    assert text.startswith("Which month sold most?")
    assert "- sales.csv (12,345 bytes)" in text and "read_file" in text
    assert request_message("q", None) == "q"
    many = [(f"file-{n:04d}-" + "x" * 100 + ".csv", n) for n in range(500)]
    crowded = request_message("q", Handover("r" * 5000, "a" * 5000, "t" * 5000), many)
    assert len(crowded) <= b.REQUEST_MESSAGE_CHARS
    assert "more: list_files()" in crowded
    assert crowded.index("<request>\nq") < crowded.index("<attachments>")
