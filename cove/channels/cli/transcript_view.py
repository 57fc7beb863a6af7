"""A conversation's transcript for people: ``cove show`` and the chat's ``/show``.

Iterations and blocks are numbered from 1, as in the JSON output and the Markdown export. A
figure is named by the file it was written to when there is one, else by its digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from cove.channels.cli.render import cut, line, python_code
from cove.channels.export import when
from cove.conversation import (
    ApprovalRecord,
    IterationRecord,
    Transcript,
    TurnRecord,
    VarVersionRecord,
)
from cove.text import clean

#: The file each figure was written to: ((turn, iteration, block), figure position) → path.
FigureFiles = Mapping[tuple[tuple[int, int, int], int], Path]


def show_transcript(
    console: Console,
    transcript: Transcript,
    prompts: Mapping[str, str] | None = None,
    files: FigureFiles | None = None,
    approvals: Sequence[ApprovalRecord] = (),
) -> None:
    """Print every turn; with ``prompts`` (digest → text), the exact prompts too; with
    ``files``, the path of each figure; each of ``approvals`` under its iteration."""
    conv = transcript.conversation
    console.print(
        line(
            (conv.label, "bold"),
            f"  {conv.id}  ",
            (f"{conv.channel}, created {when(conv.created_at)}", "dim"),
        )
    )
    if conv.parent_id:
        console.print(line((f"forked from {conv.parent_id} at turn {conv.fork_turn}", "dim")))
    for digest, text in (prompts or {}).items():
        console.rule(f"system prompt {digest[:12]}")
        console.print(clean(text), markup=False)
    for turn in transcript.turns:
        versions = [v for v in transcript.var_versions if v.turn_position == turn.position]
        decided = [a for a in approvals if a.turn_position == turn.position]
        _turn(console, turn, versions, prompts is not None, files or {}, decided)
    if not transcript.turns:
        console.print("[dim]no turns yet[/dim]")


def _turn(
    console: Console,
    turn: TurnRecord,
    versions: Sequence[VarVersionRecord],
    prompts: bool,
    files: FigureFiles,
    approvals: Sequence[ApprovalRecord] = (),
) -> None:
    console.rule(f"turn {turn.position} · {turn.status}")
    console.print(line(("request: ", "bold"), cut(turn.request, 2000)))
    for it in turn.iterations:
        _iteration(console, it, prompts, (turn.position, files))
        for approval in (a for a in approvals if a.iteration_position == it.position):
            console.print(approval_line(approval))
        # Under the iteration whose blocks wrote them, not after the turn's last iteration.
        _written(console, [v for v in versions if v.iteration_position == it.position])
    if turn.answer:
        console.print(line(("answer: ", "bold green"), turn.answer))
    if turn.error:
        console.print(line((f"error: {turn.error}", "red")))
    cost = (
        f"${turn.usage.cost_usd:.4f}"
        if turn.cost_known
        else "cost unknown (model not in the price table)"
    )
    tokens = f"{turn.usage.tokens_in:,} in + {turn.usage.tokens_out:,} out tokens"
    usage = f"{tokens} · {cost} · " + (f"model {turn.model}" if turn.model else "no model")
    if turn.model_options:
        usage += " · " + ", ".join(f"{k}={v}" for k, v in turn.model_options.items())
    console.print(line((usage, "dim")))


def approval_line(approval: ApprovalRecord) -> Text:
    """One decision on an extension call, as ``cove show`` prints it."""
    verdict = "approved" if approval.approved else "denied"
    why = approval.why
    remember = ", remembered for the conversation" if approval.remember else ""
    call = f"{approval.function}({cut(approval.arguments, 200)})"
    return line(
        ("  approval: ", "green" if approval.approved else "red"),
        f"{call} [{approval.effect}] {verdict} {why}{remember}",
    )


def _written(console: Console, versions: Sequence[VarVersionRecord]) -> None:
    if versions:
        written = ", ".join(
            f"{v.name} v{v.version} ({v.kind if v.kind != 'value' else v.type_name})"
            for v in versions
        )
        console.print(line(("variables written: ", "magenta"), written))


def _iteration(
    console: Console, it: IterationRecord, prompts: bool, where: tuple[int, FigureFiles]
) -> None:
    console.print(
        f"[cyan]iteration {it.position + 1}[/cyan] [dim]{it.status} · "
        f"{it.usage.tokens_in}+{it.usage.tokens_out} tokens · "
        f"{escape(clean(it.model)) + ' ' if it.model else ''}model {it.llm_ms:.0f} ms · "
        f"seed {it.seed}[/dim]"
    )
    for note in it.steering:
        console.print(line(("you, while it ran: ", "yellow"), cut(note, 2000)))
    if prompts:
        console.print(
            line((f"system prompt {it.system_prompt_hash[:12]}; request message:", "dim"))
        )
        console.print(clean(it.request_message), markup=False)
        console.print(line(("context message:", "dim")))
        console.print(clean(it.context_message), markup=False)
    if it.parse_error:
        console.print(line(("reply problem: ", "red"), cut(it.parse_error)))
    if it.thinking:
        console.print(line((cut(it.thinking, 1000), "dim italic")))
    total = max(len(it.planned_blocks), len(it.blocks))
    for block in it.blocks:
        # A labelled rule between blocks: consecutive blocks never read as one.
        console.print(line((f"── block {block.position + 1} of {total} ", "blue")))
        console.print(python_code(clean(block.code)))
        _block_result(console, block.stdout, block.ok, block.result_preview, block.error)
        ref = (where[0], it.position + 1, block.position + 1)
        for figure in block.figures:
            path = where[1].get((ref, figure.position))
            described = figure.describe()
            if path is None:
                described += f" (PNG {figure.digest[:12]})"
            else:
                described = f"{path} ({described.partition(': ')[2]})"
            console.print(line(("figure: ", "magenta"), clean(described)))
    if it.running_block is not None:
        console.print(
            line(
                (
                    f"── block {it.running_block + 1} of {len(it.planned_blocks)} was running "
                    "when the turn stopped:",
                    "yellow",
                )
            )
        )
        console.print(python_code(clean(it.planned_blocks[it.running_block])))
    for sq in it.subqueries:
        answer = cut(sq.reply or sq.error or "", 200)
        console.print(line((f"llm_query: {cut(sq.prompt, 200)} → {answer}", "dim")))
    if it.refusal:
        console.print(line((cut(it.refusal), "red")))


def _block_result(
    console: Console, stdout: str, ok: bool, preview: str | None, error: str | None
) -> None:
    if stdout:
        console.print(cut(stdout.rstrip()), markup=False)
    if not ok:
        console.print(line(("✗ " + cut(error or "failed"), "red")))
    elif preview is not None:
        console.print(f"→ {cut(preview)}", markup=False)
