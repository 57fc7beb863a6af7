"""Prompt size of cove's O(1) context against a growing transcript, over one long turn.

Run: ``.venv/bin/python bench/context_bench.py [--iterations 200]``

The same scripted workload feeds two prompt builders:

- cove: system prompt + request message + ONE context message (journal of the last
  ``JOURNAL_ITERATIONS`` iterations, the variable index, nudges), built by ``cove.engine.context``;
- baseline: how tool-calling agents work: the system prompt and request, then every model reply and
  every block's full output appended to a message list that is sent whole each time.

The workload is any callable returning ``IterationRecord``s. With ``--engine`` the same replies
run through the real engine instead (``Query`` on a real store file and a real sandbox worker):
the first reply also defines ``clean`` and ``summary`` in the sandbox so every block runs, cove's
sizes are what the scripted model actually received, and the baseline is rebuilt from the replies
sent and the blocks' real output.

Run with the engine: ``.venv/bin/python bench/context_bench.py --engine [--iterations 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from stack import bench_stack

from cove import codec
from cove.engine.budgets import PROMPT_CHARS, estimate_tokens
from cove.engine.context import (
    JOURNAL_ITERATIONS,
    JournalEntry,
    context_message,
    request_message,
    system_prompt,
)
from cove.engine.llm import Message
from cove.engine.llm.scripted import ReplyFunction, ScriptedClient
from cove.engine.nudges import NudgeState, builtin_nudges
from cove.engine.query import Query, TurnRequest
from cove.environment.var_index import VarEntry
from cove.events import TurnFinished
from cove.persistence.records import BlockRecord
from cove.results import BlockResult, VarVersion

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

# Sandbox definitions that make the scripted code runnable, with output of the same shape.
SANDBOX_HELPERS = """import random

def clean(values, window, drop):
    return [round(random.uniform(-5, 40), 3) for _ in range(random.randint(10, 150))]

def summary(values):
    return "\\n".join(
        f"station {random.randint(1, 400):>3}: mean {random.uniform(-5, 40):8.3f} "
        f"drift {random.uniform(-2, 2):+.4f} n={random.randint(50, 5000)}"
        for _ in range(random.randint(4, 40))
    )

stage_0 = []"""


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
            f"t1.i{i}.1",
            BlockResult(
                position=0,
                code=code,
                ok=True,
                result_preview=result,
                stdout=stdout,
                duration_ms=rng.uniform(5, 1500),
            ),
        )
        variable = VarEntry(
            VarVersion(
                name=name,
                kind="value",
                encoded=None,
                type_name="list",
                preview=result[:200],
                size=rng.randint(1_000, 90_000),
                version=1,
            ),
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
            nudges=[note.text for note in builtin_nudges(state)],
        )
        sizes.append(len(system) + len(request) + len(context))
        for variable in records[position - 1].variables:
            variables[variable.var.name] = variable
    return sizes


def baseline_prompt_sizes(
    records: Sequence[IterationRecord], system: str | None = None
) -> list[int]:
    """Characters of the prompt a transcript-growing agent sends at each iteration.

    Args:
        records: The turn's iterations.
        system: The system prompt (default: cove's, with the stand-in extension docs).
    """
    messages = [system_prompt(EXTENSION_DOCS) if system is None else system, REQUEST]
    sizes: list[int] = []
    for record in records:
        sizes.append(sum(len(m) for m in messages))
        messages.append(record.reply)
        messages.append("\n".join(_tool_output(entry) for entry in record.entries))
    return sizes


class FixedInputs:
    """Seeds and clock derived from positions only, so an engine run is the same every time."""

    def iteration_seed(self, turn: int, iteration: int) -> int:
        """A seed fixed by the iteration's place."""
        return turn * 100_000 + iteration

    def block_seed(self, turn: int, iteration: int, block: int, base: int) -> int:
        """The iteration's seed offset by the block position."""
        return base * 100 + block

    def block_clock(self, turn: int, iteration: int, block: int) -> float:
        """A fixed moment (2025-01-01 UTC)."""
        return 1_735_689_600.0

    def stops(self, turn: int, iteration: int, block: int | None) -> bool:
        """Never: the turn runs until it answers or its budget ends."""
        return False


@dataclass(frozen=True)
class EngineRun:
    """What a real engine run of a workload produced.

    Attributes:
        sizes: Characters of each prompt the engine sent, in call order.
        records: The iterations as they really ran (replies sent, blocks' real output).
        system: The system prompt the engine sent.
        failed_blocks: How many blocks failed (0 when the helpers work as intended).
        status: The turn's final status.
    """

    sizes: list[int]
    records: list[IterationRecord]
    system: str
    failed_blocks: int
    status: str


async def engine_run(records: Sequence[IterationRecord]) -> EngineRun:
    """Play ``records``' replies through ``Query`` on a real store and sandbox worker."""
    sizes: list[int] = []
    sent: list[str] = []
    system: list[str] = []

    def play(record: IterationRecord, first: bool) -> ReplyFunction:
        def reply(messages: Sequence[Message]) -> str:
            sizes.append(sum(len(m["content"]) for m in messages))
            system[:] = [messages[0]["content"]]
            data = json.loads(record.reply)
            if first:
                data["code"] = [SANDBOX_HELPERS, *data["code"]]
            sent.append(json.dumps(data))
            return sent[-1]

        return reply

    llm = ScriptedClient([play(r, i == 0) for i, r in enumerate(records)])
    status = "missing"
    async with bench_stack(max_iterations=len(records)) as stack:
        query = Query(
            settings=stack.settings,
            store=stack.store,
            env=stack.env,
            llm=llm,
            conversation=stack.conversation,
            request=TurnRequest(stack.conversation.id, REQUEST, max_iterations=len(records)),
            inputs=FixedInputs(),
        )
        async for event in query.run():
            if isinstance(event, TurnFinished):
                status = event.status
        transcript = await stack.store.transcript(stack.conversation.id)
    blocks = {
        iteration.position + 1: tuple(_entry(iteration.position + 1, b) for b in iteration.blocks)
        for turn in transcript.turns
        for iteration in turn.iterations
    }
    ran = [
        IterationRecord(reply, record.thinking, blocks.get(i, ()), ())
        for i, (reply, record) in enumerate(zip(sent, records, strict=False), start=1)
    ]
    failed = sum(1 for entries in blocks.values() for e in entries if not e.block.ok)
    return EngineRun(sizes, ran, system[0] if system else "", failed, status)


def _entry(iteration: int, block: BlockRecord) -> JournalEntry:
    # A transcript-growing agent shows the whole value, not cove's short preview of it.
    result = block.result_preview
    if block.result_encoded and codec.is_restorable(block.result_encoded):
        result = repr(codec.decode(block.result_encoded))
    shown = replace(block.result(), result_preview=result)
    return JournalEntry(f"t1.i{iteration}.{block.position + 1}", shown)


def _tool_output(entry: JournalEntry) -> str:
    block = entry.block
    parts = [f"[{entry.ref}]", block.stdout]
    if block.result_preview is not None:
        parts.append(f"=> {block.result_preview}")
    if block.error:
        parts.append(f"error: {block.error}")
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None, workload: Workload = scripted_workload) -> None:
    """Print prompt sizes at the checkpoints and the characters sent over the whole turn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=max(CHECKPOINTS))
    parser.add_argument(
        "--engine",
        action="store_true",
        help="measure the prompts the real engine sends (real store and sandbox worker)",
    )
    args = parser.parse_args(argv)
    records = list(workload(args.iterations))
    if args.engine:
        run = asyncio.run(engine_run(records))
        if len(run.sizes) != len(records):
            raise SystemExit(
                f"the engine made {len(run.sizes)} model calls for {len(records)} replies "
                f"(turn status {run.status})"
            )
        records, cove = run.records, run.sizes
        baseline = baseline_prompt_sizes(records, system=run.system)
        print(
            f"mode: engine (Query, real store file, real sandbox worker); turn status "
            f"{run.status}; {run.failed_blocks} failed blocks; baseline rebuilt from the replies "
            "sent and the blocks' real output (whole values); the first reply also defines the "
            "helpers"
        )
    else:
        cove = cove_prompt_sizes(records, budget=args.iterations)
        baseline = baseline_prompt_sizes(records)
        print("mode: prompts built by cove.engine.context from the scripted workload")
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
