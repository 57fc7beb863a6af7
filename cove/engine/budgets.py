"""Character budgets of the prompt: every size limit of what the model sees, in one place.

The prompt of every LLM call is three messages (DESIGN §5): the system prompt, the request message
and the context message. Each section of each message has a budget below, and each message has a
hard ceiling that is the sum of its sections' budgets plus fixed framing. None of these depends on
how many iterations, turns, blocks or variables came before, so ``PROMPT_CHARS`` bounds every
prompt cove ever sends. Tokens are estimated as characters / 4.
"""

from __future__ import annotations

from typing import Final

# --- Message 1: the system prompt -------------------------------------------------------------
#: Upper bound on the fixed core instructions (a test keeps the text below it).
SYSTEM_CORE_CHARS: Final = 8_000
#: The extensions' documentation; fixed per conversation, cut beyond this.
EXTENSION_DOCS_CHARS: Final = 24_000
#: The conversation's instructions (a persona, house rules, a task): longer ones are refused
#: when they are set, never cut.
INSTRUCTIONS_CHARS: Final = 4_000
#: The heading and tags around the instructions.
INSTRUCTIONS_FRAMING_CHARS: Final = 200
SYSTEM_CHARS: Final = (
    SYSTEM_CORE_CHARS + EXTENSION_DOCS_CHARS + INSTRUCTIONS_CHARS + INSTRUCTIONS_FRAMING_CHARS
)

# --- Message 2: the request (with the previous turn's handover on a later turn) ---------------
#: The turn's request; the full text stays in the sandbox as ``REQUEST``.
REQUEST_CHARS: Final = 8_000
HANDOVER_REQUEST_CHARS: Final = 600
#: The previous answer; the full text stays in the sandbox as ``LAST_ANSWER``.
HANDOVER_ANSWER_CHARS: Final = 2_000
HANDOVER_THINKING_CHARS: Final = 1_000
#: The files attached to the turn (names and sizes; the files are in the workspace).
ATTACHMENTS_CHARS: Final = 1_000
#: Tags and labels around the pieces of the request message.
REQUEST_FRAMING_CHARS: Final = 200
REQUEST_MESSAGE_CHARS: Final = (
    REQUEST_CHARS
    + HANDOVER_REQUEST_CHARS
    + HANDOVER_ANSWER_CHARS
    + HANDOVER_THINKING_CHARS
    + ATTACHMENTS_CHARS
    + REQUEST_FRAMING_CHARS
)

# --- Message 3: the context message -----------------------------------------------------------
#: ``[iteration N/M]``.
HEADER_CHARS: Final = 48
#: ``<prior_thinking>`` including its tags.
PRIOR_THINKING_CHARS: Final = 2_000

#: K: how many past iterations' blocks the engine fetches for the journal.
JOURNAL_ITERATIONS: Final = 4
#: ``<journal>`` including its tags; newer blocks win when older ones do not fit.
JOURNAL_CHARS: Final = 14_000
#: A block's reference (``t2.i3.1``) as shown.
BLOCK_REF_CHARS: Final = 32
#: Per-field limits of a block shown in full...
BLOCK_CODE_CHARS: Final = 1_500
BLOCK_RESULT_CHARS: Final = 1_000
BLOCK_STDOUT_CHARS: Final = 1_000
BLOCK_STDERR_CHARS: Final = 500
BLOCK_ERROR_CHARS: Final = 800
#: ...and of an older block squeezed in when the full form no longer fits.
COMPACT_CODE_CHARS: Final = 300
COMPACT_RESULT_CHARS: Final = 200
COMPACT_STDOUT_CHARS: Final = 200
COMPACT_STDERR_CHARS: Final = 120
COMPACT_ERROR_CHARS: Final = 300
#: An attached figure (``model_images``: a low-detail image, about 85 tokens) counts as this
#: many characters of the context message; the journal gives up that much room.
IMAGE_CHARS: Final = 1_200
#: A block's figures described (size, title, axis labels), and the characters of each line.
BLOCK_FIGURES: Final = 4
FIGURE_CHARS: Final = 240
#: A block that ran at least this long is marked ``(slow: N ms)``.
SLOW_BLOCK_MS: Final = 1_000.0

#: ``<var_index>`` including its tags and the overflow line.
VAR_INDEX_CHARS: Final = 4_000
VAR_INDEX_ROWS: Final = 30
VAR_NAME_CHARS: Final = 48
VAR_TYPE_CHARS: Final = 32
VAR_PREVIEW_CHARS: Final = 80
VAR_SIGNATURE_CHARS: Final = 100

#: All ``[nudge]`` lines together, at most ``MAX_NUDGES`` of at most ``NUDGE_CHARS`` each.
NUDGES_CHARS: Final = 1_500
MAX_NUDGES: Final = 6
NUDGE_CHARS: Final = 240

#: ``<from_the_user>``: messages the person sent while the turn ran (steering), all together.
STEERING_CHARS: Final = 2_000

#: Blank lines between the sections.
CONTEXT_FRAMING_CHARS: Final = 16
CONTEXT_CHARS: Final = (
    HEADER_CHARS
    + PRIOR_THINKING_CHARS
    + JOURNAL_CHARS
    + VAR_INDEX_CHARS
    + NUDGES_CHARS
    + STEERING_CHARS
    + CONTEXT_FRAMING_CHARS
)

# --- The whole prompt -------------------------------------------------------------------------
PROMPT_CHARS: Final = SYSTEM_CHARS + REQUEST_MESSAGE_CHARS + CONTEXT_CHARS


def estimate_tokens(chars: int) -> int:
    """The token estimate cove uses when the API reports no usage: characters / 4, rounded up."""
    return (chars + 3) // 4
