"""SSE frames: the format browsers parse, made once per event however many clients there are."""

from __future__ import annotations

import json

from cove.channels.web.sse import Frames, sse
from cove.events import TitleChanged


def test_frame_format_and_reuse() -> None:
    event = TitleChanged(title="a\nb", conversation_id="c1", seq=7)
    frame = sse(event)
    assert frame.startswith(b"id: 7\ndata: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 3  # one data line: newlines inside values stay escaped
    assert json.loads(frame.split(b"data: ", 1)[1]) == event.to_json()
    assert not sse(event, with_id=False).startswith(b"id:")

    frames = Frames(size=2)
    first = frames.frame(event, True)
    assert frames.frame(event, True) is first  # made once, shared by every client
    equal_but_other = TitleChanged(title="a\nb", conversation_id="c1", seq=7)
    assert frames.frame(equal_but_other, True) == first
    for seq in (8, 9, 10):
        frames.frame(TitleChanged(title="x", conversation_id="c1", seq=seq), True)
    assert frames.frame(event, True) is not first  # evicted: bounded memory
