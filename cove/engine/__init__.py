"""The engine: one turn (query), one LLM round-trip (iteration), the O(1) context, LLM clients."""
