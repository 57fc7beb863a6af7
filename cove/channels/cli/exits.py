"""The exit codes of the ``cove`` command and the one mapping of errors to them.

====  =====================================================================
0     the turn is done / the command succeeded / a replay matched
1     the turn failed (model endpoint, infrastructure) or an unexpected error
2     bad usage (unknown command, bad flag, bad configuration, ambiguous id prefix, a channel
      whose install extra is missing)
3     the turn ran out of iterations (``max_iterations``)
4     the turn hit its consecutive-error budget (``error_budget``)
5     the turn was cancelled
6     the conversation is busy (another process is running a turn in it)
7     not found (unknown conversation id, turn or variable)
8     a replay diverged from the record
9     the database cannot be used (not a cove database, newer schema, …)
10    a server cannot listen on its address (``cove web``/``cove serve``: port in use, …)
====  =====================================================================
"""

from __future__ import annotations

from cove.errors import (
    AmbiguousId,
    Busy,
    ConfigError,
    CoveError,
    ListenError,
    MissingExtra,
    NotFound,
    StoreError,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_MAX_ITERATIONS, EXIT_ERROR_BUDGET, EXIT_CANCELLED = 3, 4, 5
EXIT_BUSY, EXIT_NOT_FOUND, EXIT_DIVERGED, EXIT_STORE = 6, 7, 8, 9
EXIT_CANNOT_LISTEN = 10

EXIT_CODES_HELP = (
    "Exit codes: 0 done, 1 failed, 2 bad usage, ambiguous id or missing extra, 3 max iterations, "
    "4 error budget, 5 cancelled, 6 busy, 7 not found, 8 replay diverged, 9 database unusable, "
    "10 cannot listen (port in use)."
)

STATUS_EXIT = {
    "done": EXIT_OK,
    "failed": EXIT_FAILED,
    "interrupted": EXIT_FAILED,
    "max_iterations": EXIT_MAX_ITERATIONS,
    "error_budget": EXIT_ERROR_BUDGET,
    "cancelled": EXIT_CANCELLED,
}


def exit_code_for(exc: CoveError) -> int:
    """The exit code for an error (the one mapping of ``CoveError`` to this surface)."""
    if isinstance(exc, (ConfigError, AmbiguousId, MissingExtra)):
        return EXIT_USAGE  # an ambiguous prefix is a usage problem: the message lists candidates
    if isinstance(exc, Busy):
        return EXIT_BUSY
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, StoreError):
        return EXIT_STORE
    if isinstance(exc, ListenError):
        return EXIT_CANNOT_LISTEN
    return EXIT_FAILED
