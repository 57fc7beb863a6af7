"""Prompt size of cove's O(1) context against a growing transcript, over one long turn.

Run: ``.venv/bin/python bench/context_bench.py [--iterations 200]``

The same scripted workload feeds two prompt builders:

- cove: system prompt + request message + ONE context message (journal of the last
  ``JOURNAL_ITERATIONS`` iterations, the variable index, nudges), built by ``cove.engine.context``;
- baseline: how tool-calling agents work: the system prompt and request, then every model reply and
  every block's full output appended to a message list that is sent whole each time.

The workload is any callable returning ``IterationRecord``s, so the same measurement can later be
pointed at a real engine run (build the records from a stored transcript) instead of the script.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from cove.engine.budgets import PROMPT_CHARS, estimate_tokens
from cove.engine.context import (
    JOURNAL_ITERATIONS,
    JournalEntry,
    context_message,
    request_message,
    system_prompt,
)
from cove.engine.nudges import NudgeState, builtin_nudges
from cove.environment.var_index import VarEntry

CHECKPOINTS = (10, 50, 100, 200)
REQUEST = (
    "Load the sensor readings, clean them step by step, and tell me which stations drift the "
    "most over the period, with the size of the drift."
)
# Stands in for the extensions' documentation (the real text comes from the environment).
EXTENSION_DOCS = "\n".join(
    f"- {name}: {doc}"
    for name, doc in [
        ("history(n=10)", "the last n blocks with code, result, stdout and error."),
        ("var_history(name)", "every version of a variable, newest first, with previews."),
        ("var_diff(name, v1, v2)", "what changed between two versions of a variable."),
        ("restore_var(name, version)", "bring back an earlier version of a variable."),
        ("forget(*names)", "delete variables you no longer need."),
        ("search(text)", "full-text search over past requests, answers and code."),
        ("shape(value)", "the structure of a large value: types, lengths, keys, samples."),
        ("request_more_iterations(n)", "ask for n more iterations in this turn."),
        ("set_title(text)", "set the conversation title."),
        ("llm_query(prompt)", "one sub-question to a language model; returns its text."),
        ("llm_query_batch(prompts)", "several sub-questions at once; returns a list."),
        ("read_file(path)", "the text of a file in the conversation's workspace."),
        ("write_file(path, text)", "write a file in the workspace."),
        ("list_files(path='.')", "the files in a workspace directory."),
    ]
    * 4  # a few extensions' worth of examples and prose
)


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration produced, as both prompt builders need it.

    Attributes:
        reply: The model's raw reply text.
        thinking: The reply's thinking.
        entries: The iteration's blocks as journal entries.
        variables: The variables the iteration wrote (new versions).
    """

    reply: str
    thinking: str
    entries: tuple[JournalEntry, ...]
    variables: tuple[VarEntry, ...]


Workload = Callable[[int], Iterable[IterationRecord]]


def scripted_workload(iterations: int, seed: int = 7) -> Iterator[IterationRecord]:
    """A deterministic turn: each iteration writes one variable and shows a value.

    Each block's printed output and trailing value together run from a few hundred to a few
    thousand characters, like a model exploring data one step at a time.
    """
    rng = random.Random(seed)
    for i in range(1, iterations + 1):
        name = f"stage_{i}"
        code = (
            f"{name} = clean(stage_{i - 1}, window={rng.randint(3, 30)}, drop={rng.random():.3f})\n"
            f"print(summary({name}))\n"
            f"{name}[:40]"
        )
        stdout = "".join(
            f"station {rng.randint(1, 400):>3}: mean {rng.uniform(-5, 40):8.3f} "
            f"drift {rng.uniform(-2, 2):+.4f} n={rng.randint(50, 5000)}\n"
            for _ in range(rng.randint(4, 40))
        )
        result = repr([round(rng.uniform(-5, 40), 3) for _ in range(rng.randint(10, 150))])
        thinking = (
            f"Stage {i}: the drift estimate moved; smooth with a new window and compare the "
            f"stations again before answering. "
            + "Checking the outliers first. "
            * rng.randint(1, 6)
        )
        reply = json.dumps({"thinking": thinking, "code": [code], "answer": None})
        entry = JournalEntry(
            ref=f"t1.i{i}.1",
            code=code,
            ok=True,
            result=result,
            stdout=stdout,
            stderr="",
            error=None,
            duration_ms=rng.uniform(5, 1500),
        )
        variable = VarEntry(
            name=name,
            version=1,
            kind="value",
            type_name="list",
            size=rng.randint(1_000, 90_000),
            preview=result[:200],
            updated_seq=i,
        )
        yield IterationRecord(reply, thinking, (entry,), (variable,))


def cove_prompt_sizes(records: Sequence[IterationRecord], budget: int) -> list[int]:
    """Characters of the prompt cove sends at each iteration (1-based position in the list)."""
    system = system_prompt(EXTENSION_DOCS)
    request = request_message(REQUEST, None)
    sizes: list[int] = []
    variables: dict[str, VarEntry] = {}
    for position in range(1, len(records) + 1):
        done = records[: position - 1]
        journal = [e for record in done[-JOURNAL_ITERATIONS:] for e in record.entries]
        state = NudgeState(iteration=position, budget=budget, var_count=len(variables))
        context = context_message(
            iteration=position,
            budget=budget,
            prior_thinking=done[-1].thinking if done else None,
            journal=journal,
            var_index=list(variables.values()),
            nudges=builtin_nudges(state),
        )
        sizes.append(len(system) + len(request) + len(context))
        for variable in records[position - 1].variables:
            variables[variable.name] = variable
    return sizes


def baseline_prompt_sizes(records: Sequence[IterationRecord]) -> list[int]:
    """Characters of the prompt a transcript-growing agent sends at each iteration."""
    messages = [system_prompt(EXTENSION_DOCS), REQUEST]
    sizes: list[int] = []
    for record in records:
        sizes.append(sum(len(m) for m in messages))
        messages.append(record.reply)
        messages.append("\n".join(_tool_output(entry) for entry in record.entries))
    return sizes


def _tool_output(entry: JournalEntry) -> str:
    parts = [f"[{entry.ref}]", entry.stdout]
    if entry.result is not None:
        parts.append(f"=> {entry.result}")
    if entry.error:
        parts.append(f"error: {entry.error}")
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None, workload: Workload = scripted_workload) -> None:
    """Print prompt sizes at the checkpoints and the characters sent over the whole turn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=max(CHECKPOINTS))
    args = parser.parse_args(argv)
    records = list(workload(args.iterations))
    cove = cove_prompt_sizes(records, budget=args.iterations)
    baseline = baseline_prompt_sizes(records)
    print(f"workload: {len(records)} iterations, 1 block and 1 variable each")
    print(f"cove ceiling: {PROMPT_CHARS:,} chars (~{estimate_tokens(PROMPT_CHARS):,} tokens)\n")
    header = (
        f"{'iteration':>9} | {'cove chars':>11} {'~tokens':>8} | {'baseline chars':>14} "
        f"{'~tokens':>9} | {'ratio':>6} | {'cove sent so far':>16} {'baseline so far':>16}"
    )
    print(header)
    print("-" * len(header))
    for n in (c for c in CHECKPOINTS if c <= len(records)):
        c, base = cove[n - 1], baseline[n - 1]
        print(
            f"{n:>9} | {c:>11,} {estimate_tokens(c):>8,} | {base:>14,} "
            f"{estimate_tokens(base):>9,} | {base / c:>5.1f}x | "
            f"{sum(cove[:n]):>16,} {sum(baseline[:n]):>16,}"
        )
    total_cove, total_base = sum(cove), sum(baseline)
    print(
        f"\nwhole turn: cove sent {total_cove:,} chars (~{estimate_tokens(total_cove):,} tokens), "
        f"baseline {total_base:,} chars (~{estimate_tokens(total_base):,} tokens): "
        f"{total_base / total_cove:.1f}x more"
    )
    print(f"largest cove prompt: {max(cove):,} chars; smallest: {min(cove):,} chars")


if __name__ == "__main__":
    main()
