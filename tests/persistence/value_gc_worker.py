"""A separate process that deletes conversations, for the value store's kill -9 test.

Usage (run with the project's Python)::

    value_gc_worker.py DB      delete every conversation titled "doomed", one after the other

It prints ``deleting ID`` before each deletion and ``deleted ID`` once it returned (the
conversation's rows are gone and the chunks only it held collected), then ``done``.
"""

from __future__ import annotations

import asyncio
import sys

from cove.persistence.store import Store


async def main(path: str) -> None:
    async with Store.open(path) as store:
        for conversation in await store.list_conversations(limit=1000):
            if conversation.title != "doomed":
                continue
            print(f"deleting {conversation.id}", flush=True)
            await store.delete_conversation(conversation.id)
            print(f"deleted {conversation.id}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
