"""A fake Telegram Bot API server that the real python-telegram-bot ``Application`` talks to.

It speaks the Bot API wire format (``POST /bot<token>/<method>`` with form, multipart or JSON
parameters; ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": ..,
"description": ..}``), records every call, and lets a test play the users::

    with FakeTelegram() as tg:
        app = ApplicationBuilder().token(tg.token).base_url(tg.api_url + "/bot")...
        tg.send_text(chat_id=1, text="hello")            # queued for getUpdates
        tg.fail_next("sendMessage", 429, retry_after=1)   # flood control once
        tg.fail_next("sendMessage", 400, "Bad Request: can't parse entities: ...")
        held = tg.hold("getFile")                         # answered once held.set()
        file_id = tg.add_file(b"a,b\\n1,2\\n", "data.csv")
        await tg.wait_for(lambda: tg.calls_of("sendMessage"))

Like Telegram it refuses HTML it cannot parse (unknown or unbalanced tags), texts over 4096
characters and an edit that changes nothing; ``sendPhoto`` takes a PNG or JPEG upload of at most
10 MB whose sides add up to at most 10,000 pixels, neither over 20 times the other.
``getUpdates`` long-polls: it answers as soon as an update is queued or after its ``timeout``.
Files added with ``add_file`` are served by ``getFile`` and ``GET /file/bot<token>/<file_path>``.
The server runs uvicorn in a background thread, so a test's own event loop stays free.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import html
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOKEN = "123456789:AAFakeTokenForTestsDoNotLeak0123456789"
BOT_ID = 123456789
BOT_USERNAME = "cove_test_bot"
MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
ALLOWED_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
    "blockquote", "tg-spoiler", "span", "tg-emoji",
}  # fmt: skip
# Parameters Telegram takes as plain strings; every other one arrives JSON-encoded.
_STRING_PARAMS = {
    "text", "caption", "parse_mode", "action", "file_id", "url", "secret_token", "title",
    "description", "emoji", "callback_query_id", "inline_message_id",
}  # fmt: skip


@dataclass
class Call:
    """One Bot API call as the server received it."""

    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)
    error: int | None = None  # the error code answered, None when it succeeded


@dataclass
class Fault:
    """One queued failure for a method."""

    status: int
    description: str
    retry_after: int | None = None
    when: Callable[[dict[str, Any]], bool] | None = None


class _TagChecker(HTMLParser):
    """Accepts what Telegram's HTML parse mode accepts (closely enough for tests)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problem: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problem = self.problem or f'unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problem = self.problem or f'unmatched end tag "{tag}"'
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed_text(text: str, parse_mode: str | None) -> tuple[str, str | None]:
    """The text a reader sees and the parse problem Telegram would report (None: fine)."""
    if parse_mode is None or parse_mode == "":
        return text, None
    if parse_mode.lower() != "html":
        return text, None  # Markdown modes are accepted as they are (tests inject rejections)
    checker = _TagChecker()
    checker.feed(text)
    checker.close()
    problem = checker.problem
    if problem is None and checker.stack:
        problem = f'can\'t find end tag corresponding to start tag "{checker.stack[-1]}"'
    return "".join(checker.text), problem


class FakeTelegram:
    """The fake Bot API: start with ``with FakeTelegram() as tg`` (or ``start``/``stop``)."""

    def __init__(self, *, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.messages: dict[int, dict[int, dict[str, Any]]] = {}  # chat -> id -> message
        self.files: dict[str, tuple[str, bytes]] = {}
        self.webhook: dict[str, Any] | None = None
        self._faults: dict[str, list[Fault]] = {}
        self._holds: dict[str, tuple[threading.Event, Callable[[dict[str, Any]], bool]]] = {}
        self._updates: list[dict[str, Any]] = []
        self._next_update = itertools.count(1)
        self._next_message = itertools.count(1000)
        self._next_file = itertools.count(1)
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrived: asyncio.Event | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- what tests use --------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The server's root URL (the bot adds ``/bot<token>`` and ``/file/bot<token>``)."""
        return f"http://127.0.0.1:{self.port}"

    def text_update(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        reply_to_bot: bool = False,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        """A text message update from a user (commands get their ``bot_command`` entity)."""
        message = self._message(chat_id, user_id, chat_type, thread_id)
        message["text"] = text
        if text.startswith("/"):
            length = len(text.split()[0])
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": length}]
        elif f"@{BOT_USERNAME}" in text:
            offset = text.index(f"@{BOT_USERNAME}")
            mention = {"type": "mention", "offset": offset, "length": len(BOT_USERNAME) + 1}
            message["entities"] = [mention]
        if reply_to_bot:
            message["reply_to_message"] = {
                "message_id": 1,
                "date": int(time.time()),
                "chat": message["chat"],
                "from": self.bot_user(),
                "text": "earlier",
            }
        return {"update_id": next(self._next_update), "message": message}

    def send_text(self, chat_id: int, text: str, **kw: Any) -> int:
        """Queue a text message from a user for ``getUpdates`` (see ``text_update``)."""
        return self._queue(self.text_update(chat_id, text, **kw))

    def press(self, chat_id: int, message_id: int, data: str, *, user_id: int | None = None) -> int:
        """Queue a press of an inline keyboard button (``data``) under a message the bot sent
        to ``chat_id``, by ``user_id`` (default: the chat's own user)."""
        with self._changed:
            sent = dict(self.messages[chat_id][message_id])
        user = user_id if user_id is not None else chat_id
        query = {
            "id": f"q{next(self._next_update)}",
            "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
            "message": sent,
            "chat_instance": f"i{chat_id}",
            "data": data,
        }
        return self._queue({"update_id": next(self._next_update), "callback_query": query})

    def keyboard(self, chat_id: int, message_id: int) -> list[tuple[str, str]]:
        """The inline keyboard a message carries now: (text, callback data) per button."""
        with self._changed:
            markup = self.messages[chat_id][message_id].get("reply_markup") or {}
        rows = markup.get("inline_keyboard", [])
        return [(b["text"], b.get("callback_data", "")) for row in rows for b in row]

    def send_document(
        self, chat_id: int, data: bytes, name: str, *, caption: str | None = None, **kw: Any
    ) -> int:
        """Queue a document from a user; its bytes are served through ``getFile``."""
        return self._queue(self.document_update(chat_id, data, name, caption=caption, **kw))

    def document_update(
        self, chat_id: int, data: bytes, name: str, *, caption: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        """A document message update from a user; its bytes are served through ``getFile``."""
        file_id = self.add_file(data, name)
        message = self._message(chat_id, kw.get("user_id"), kw.get("chat_type", "private"), None)
        message["document"] = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": name,
            "mime_type": "text/csv" if name.endswith(".csv") else "application/octet-stream",
            "file_size": len(data),
        }
        if caption is not None:
            message["caption"] = caption
        return {"update_id": next(self._next_update), "message": message}

    def send_photo(self, chat_id: int, data: bytes, *, caption: str | None = None) -> int:
        """Queue a photo from a user (a small thumbnail and the full size, as Telegram does)."""
        small, large = self.add_file(data[:16], "thumb.jpg"), self.add_file(data, "photo.jpg")
        message = self._message(chat_id, None, "private", None)
        message["photo"] = [
            {"file_id": f, "file_unique_id": f"u{f}", "width": w, "height": w, "file_size": n}
            for f, w, n in ((small, 90, 16), (large, 1280, len(data)))
        ]
        if caption is not None:
            message["caption"] = caption
        return self._queue({"update_id": next(self._next_update), "message": message})

    def add_file(self, data: bytes, name: str) -> str:
        """Store a file for ``getFile``; returns its ``file_id``."""
        file_id = f"file{next(self._next_file)}"
        self.files[file_id] = (f"documents/{file_id}_{name}", data)
        return file_id

    def fail_next(
        self,
        method: str,
        status: int,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        count: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Answer the next ``count`` calls of ``method`` (whose parameters pass ``when``) with
        an error."""
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}"
                if status == 429
                else "Bad Request: can't parse entities: Can't find end of the entity"
            )
        with self._changed:
            self._faults.setdefault(method, []).extend(
                Fault(status, description, retry_after, when) for _ in range(count)
            )

    def hold(
        self, method: str, when: Callable[[dict[str, Any]], bool] = lambda params: True
    ) -> threading.Event:
        """Hold back the answer to every call of ``method`` whose parameters ``when`` accepts
        (each is recorded as it arrives) until the returned event is set: a caller stays
        between sending and being answered, and what it sends is not shown yet."""
        held = threading.Event()
        with self._changed:
            self._holds[method] = (held, when)
        return held

    def calls_of(self, method: str, chat_id: int | None = None) -> list[Call]:
        """The recorded calls of ``method`` (to ``chat_id`` when given), oldest first."""
        with self._changed:
            return [
                c
                for c in self.calls
                if c.method == method and (chat_id is None or c.params.get("chat_id") == chat_id)
            ]

    def texts(self, chat_id: int) -> list[str]:
        """The current text of every message the bot sent to a chat, oldest first."""
        with self._changed:
            chat = self.messages.get(chat_id, {})
            return [m.get("text") or m.get("caption") or "" for _, m in sorted(chat.items())]

    def bot_user(self) -> dict[str, Any]:
        """The bot's ``User`` object."""
        return {"id": BOT_ID, "is_bot": True, "first_name": "cove", "username": BOT_USERNAME}

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:  # noqa: ASYNC109
        """Wait until ``predicate()`` is truthy (checked whenever a call arrives); return it."""

        def check() -> Any:
            with self._changed:
                ok = self._changed.wait_for(predicate, timeout)
            if not ok:
                recent = "\n".join(
                    f"  {c.method} {c.error or ''} "
                    f"{ {k: str(v)[:100] for k, v in c.params.items()} }"
                    for c in [c for c in self.calls if c.method != "getUpdates"][-12:]
                )
                raise TimeoutError(f"condition not met within {timeout} s; last calls:\n{recent}")
            return ok

        return await asyncio.to_thread(check)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        """Serve on a free loopback port in a background thread."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="error", lifespan="off")
        self._server = uvicorn.Server(config)
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._arrived = asyncio.Event()
            loop.call_soon(ready.set)
            loop.run_until_complete(self._server.serve(sockets=[sock]))  # type: ignore[union-attr]
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-telegram", daemon=True)
        self._thread.start()
        ready.wait(10)
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.01)  # start-up of a thread we own; not a test's wait
        return self

    def stop(self) -> None:
        """Stop the server and its thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the server side -------------------------------------------------------------------

    def _message(
        self, chat_id: int, user_id: int | None, chat_type: str, thread_id: int | None
    ) -> dict[str, Any]:
        user = user_id if user_id is not None else chat_id
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = f"user{user}"
        else:
            chat["title"] = f"group {chat_id}"
        message: dict[str, Any] = {
            "message_id": next(self._next_message),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
        }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        return message

    def _queue(self, update: dict[str, Any]) -> int:
        update_id: int = update["update_id"]
        with self._changed:
            self._updates.append(update)
        if self._loop is not None and self._arrived is not None:
            self._loop.call_soon_threadsafe(self._arrived.set)
        return update_id

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._api, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )

    async def _api(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            params, files = await _read_params(request)
        except ClientDisconnect:  # the bot stopped while this call was on its way
            return Response(status_code=499)
        call = Call(method, params, files)
        with self._changed:
            fault = self._take_fault(method, params)
            self.calls.append(call)
            self._changed.notify_all()
        hold = self._holds.get(method)
        if hold is not None and hold[1](params):
            await asyncio.to_thread(hold[0].wait)
        if fault is not None:
            call.error = fault.status
            extra = {"retry_after": fault.retry_after} if fault.retry_after else None
            return _error(fault.status, fault.description, extra)
        if method == "getUpdates":
            return await self._get_updates(params)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        try:
            result = handler(params, files)
        except _ApiError as exc:
            call.error = exc.status
            return _error(exc.status, exc.description)
        finally:
            with self._changed:
                self._changed.notify_all()
        return JSONResponse({"ok": True, "result": result})

    def _take_fault(self, method: str, params: dict[str, Any]) -> Fault | None:
        faults = self._faults.get(method, [])
        for index, fault in enumerate(faults):
            if fault.when is None or fault.when(params):
                return faults.pop(index)
        return None

    async def _get_updates(self, params: dict[str, Any]) -> Response:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        assert self._arrived is not None
        while True:
            with self._changed:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
                ready = list(self._updates)
                self._arrived.clear()
            if ready or time.monotonic() >= deadline:
                return JSONResponse({"ok": True, "result": ready})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), deadline - time.monotonic())

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        for path, data in self.files.values():
            if path == request.path_params["path"]:
                return Response(data, media_type="application/octet-stream")
        return Response(status_code=404)

    # -- methods ---------------------------------------------------------------------------

    def _m_getMe(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        return {**self.bot_user(), "can_join_groups": True, "can_read_all_group_messages": False}

    def _m_deleteWebhook(self, params: dict[str, Any], files: Any) -> bool:
        self.webhook = None
        return True

    def _m_setWebhook(self, params: dict[str, Any], files: Any) -> bool:
        self.webhook = params
        return True

    def _m_setMyCommands(self, params: dict[str, Any], files: Any) -> bool:
        return True

    def _m_sendChatAction(self, params: dict[str, Any], files: Any) -> bool:
        return True

    def _m_answerCallbackQuery(self, params: dict[str, Any], files: Any) -> bool:
        return True

    def _m_getFile(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        found = self.files.get(str(params.get("file_id")))
        if found is None:
            raise _ApiError(400, "Bad Request: invalid file_id")
        path, data = found
        return {
            "file_id": params["file_id"],
            "file_unique_id": f"u{params['file_id']}",
            "file_size": len(data),
            "file_path": path,
        }

    def _m_sendMessage(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        text = _checked_text(params.get("text"), params.get("parse_mode"))
        return self._store(params, text=text, reply_markup=params.get("reply_markup"))

    def _m_sendDocument(
        self, params: dict[str, Any], files: dict[str, tuple[str, bytes]]
    ) -> dict[str, Any]:
        if "document" not in files:
            raise _ApiError(400, "Bad Request: there is no document in the request")
        name, data = files["document"]
        file_id = self.add_file(data, name)
        document = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_name": name,
                    "file_size": len(data)}  # fmt: skip
        caption = params.get("caption")
        return self._store(params, document=document, caption=caption)

    def _m_sendPhoto(
        self, params: dict[str, Any], files: dict[str, tuple[str, bytes]]
    ) -> dict[str, Any]:
        if "photo" not in files:
            raise _ApiError(400, "Bad Request: there is no photo in the request")
        name, data = files["photo"]
        width, height = _image_size(data)
        if len(data) > MAX_PHOTO_BYTES:
            raise _ApiError(400, "Bad Request: file is too big")
        if width + height > 10_000 or max(width, height) > 20 * min(width, height):
            raise _ApiError(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        caption = params.get("caption")
        if caption is not None and len(caption) > MAX_CAPTION:
            raise _ApiError(400, "Bad Request: message caption is too long")
        file_id = self.add_file(data, name)
        photo = [{"file_id": file_id, "file_unique_id": f"u{file_id}", "width": width,
                  "height": height, "file_size": len(data)}]  # fmt: skip
        return self._store(params, photo=photo, caption=caption)

    def _m_editMessageText(self, params: dict[str, Any], files: Any) -> dict[str, Any]:
        chat = self.messages.get(params.get("chat_id"), {})  # type: ignore[arg-type]
        message = chat.get(params.get("message_id"))  # type: ignore[arg-type]
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        text = _checked_text(params.get("text"), params.get("parse_mode"))
        if text == message.get("text"):
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup of "
                "the message",
            )
        with self._changed:
            message["text"] = text
            message["edits"] = message.get("edits", 0) + 1
            # As Telegram does: an edit without a keyboard takes the message's away.
            if params.get("reply_markup"):
                message["reply_markup"] = params["reply_markup"]
            else:
                message.pop("reply_markup", None)
            message["edit_date"] = int(time.time())
        return message

    def _store(self, params: dict[str, Any], **content: Any) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int):
            raise _ApiError(400, "Bad Request: chat not found")
        message = {
            "message_id": next(self._next_message),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self.bot_user(),
            **{k: v for k, v in content.items() if v is not None},
        }
        if "message_thread_id" in params:
            message["message_thread_id"] = params["message_thread_id"]
        with self._changed:
            self.messages.setdefault(chat_id, {})[message["message_id"]] = message
        return message


class _ApiError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


def _checked_text(text: Any, parse_mode: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise _ApiError(400, "Bad Request: message text is empty")
    shown, problem = parsed_text(text, parse_mode)
    if problem is not None:
        raise _ApiError(400, f"Bad Request: can't parse entities: {problem}")
    if len(shown) > MAX_TEXT:
        raise _ApiError(400, "Bad Request: message is too long")
    return html.unescape(shown) if parse_mode else text


def _image_size(data: bytes) -> tuple[int, int]:
    """A PNG's or JPEG's width and height, as Telegram reads them; anything else is refused."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data.startswith(b"\xff\xd8"):
        return 1280, 1280  # the users' photos of these tests; their size is not checked
    raise _ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")


def _error(status: int, description: str, parameters: dict[str, Any] | None = None) -> Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status_code=status)


def _decode(name: str, raw: str) -> Any:
    if name in _STRING_PARAMS:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def _read_params(request: Request) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    """The call's parameters (decoded as Telegram does) and its uploaded files."""
    kind = request.headers.get("content-type", "")
    body = await request.body()
    params: dict[str, Any] = dict(request.query_params)
    files: dict[str, tuple[str, bytes]] = {}
    if kind.startswith("application/json"):
        params.update(json.loads(body or b"{}"))
        return params, files
    if kind.startswith("multipart/form-data"):
        head = f"Content-Type: {kind}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        for part in parsed.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            filename = part.get_filename()
            if filename is not None:
                files[str(name)] = (filename, payload)
            else:
                params[str(name)] = _decode(str(name), payload.decode())
        return params, files
    for name, raw in parse_qsl(body.decode(), keep_blank_values=True):
        params[name] = _decode(name, raw)
    return params, files
