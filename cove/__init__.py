"""cove: a conversational Python sandbox with versioned, replayable state."""

__version__ = "0.1.0"
