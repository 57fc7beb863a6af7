"""``OpenAIClient``: any OpenAI-compatible chat endpoint through the ``openai`` package.

Endpoints differ in what they accept, so the client starts with the richest request (streaming
with usage, ``response_format`` json_schema, ``reasoning_effort`` when enabled) and steps down
when the endpoint rejects a feature with a 400: json_schema -> json_object -> no response_format;
``stream_options`` dropped; streaming off; ``reasoning_effort`` dropped. What worked is remembered
for the client's lifetime (one client talks to one endpoint and model).

Transient failures before a reply begins (429, 408/409, 5xx, connection errors, timeouts) are
retried by the ``openai`` package itself, ``settings.max_retries`` times, with its backoff and its
reading of ``Retry-After`` (a wait it will not honour, over two minutes, fails at once). What
the package does not retry is a reply that breaks off after it began (a dropped stream, a stall
mid-stream, a body that is not JSON): this client sends such a request again, from the same
retry budget. Every failure leaves as ``ModelError`` whose message, like every log record and
``repr``, never contains the API key. Each retry is told to the caller's ``on_retry`` as it
begins: hooks on the HTTP client read the package's retry count header (``RETRY_COUNT_HEADER``)
on each request and the status of each response, for the call running in the current task.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal, NoReturn, Protocol
from urllib.parse import urlsplit, urlunsplit

import openai
from openai import AsyncOpenAI, AsyncStream

from cove.config import ModelSettings
from cove.engine.budgets import estimate_tokens
from cove.engine.llm.chunks import MalformedReply, reply_text, usage_of
from cove.engine.llm.client import (
    CallKind,
    Completion,
    DeltaSink,
    Message,
    Reasoning,
    Retry,
    RetrySink,
    prompt_chars,
)
from cove.engine.llm.lanes import Lanes
from cove.engine.llm.stream import read_reply
from cove.engine.protocol import REPLY_SCHEMA
from cove.errors import ModelError
from cove.persistence.records import ModelOption
from cove.results import Usage

log = logging.getLogger("cove.engine.llm")

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
# Local endpoints ignore the key, but the openai package insists on one.
PLACEHOLDER_API_KEY: Final = "not-needed"
#: The longest pause before sending again a request whose reply broke off.
BACKOFF_CAP_S: Final = 30.0
#: The header in which the ``openai`` package tells the endpoint how many retries came before.
RETRY_COUNT_HEADER: Final = "x-stainless-retry-count"
REASONING_EFFORT: Final[dict[str, str]] = {"quick": "low", "balanced": "medium", "deep": "high"}
JSON_SCHEMA_FORMAT: Final[dict[str, Any]] = {
    "type": "json_schema",
    "json_schema": {"name": "cove_reply", "strict": True, "schema": REPLY_SCHEMA},
}
_RETRYABLE_STATUS: Final = frozenset({408, 409, 429})
#: A ``Retry-After`` longer than this is not waited for by the ``openai`` package: no retry.
MAX_RETRY_AFTER_S: Final = 120.0
_STATUS_WORDS: Final = {408: "request timeout", 409: "conflict", 429: "rate limited"}
_REDACTED: Final = "[redacted]"
#: Keys shorter than this are placeholders ("x", "none"), not secrets: never redacted, so an
#: error message keeps its words.
MIN_SECRET_CHARS: Final = 8
#: Keys at least this long are redacted wherever they occur: a random string this long cannot
#: turn up inside other text by chance. Shorter keys only as whole tokens.
ANYWHERE_SECRET_CHARS: Final = 20

ResponseFormat = Literal["json_schema", "json_object", "none"]
#: What ``chat.completions.create`` asks of the package for every request: the bearer key.
_REQUEST_OPTIONS: Final[openai.RequestOptions] = {"security": {"bearer_auth": True}}


@dataclass
class _Support:
    """What the endpoint has been seen to accept; only ever steps down."""

    response_format: ResponseFormat = "json_schema"
    stream: bool = True
    stream_usage: bool = True
    reasoning_effort: bool = True


class _BrokenReply(Exception):
    """A reply that began and then broke off: the ``openai`` package does not retry those."""

    def __init__(self, error: ModelError, cause: BaseException, attempts: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.cause = cause
        self.attempts = attempts  # the package's retries before the reply began, plus one


@dataclass
class _Retries:
    """The retries of the call running in this task, as the HTTP client's hooks see them."""

    sink: RetrySink | None
    budget: int  # retries the whole call may make
    spent: int = 0  # attempts used up by earlier rounds of the call
    told: int = 0  # the last retry announced
    answered: bool = False  # whether the latest attempt got a response

    async def tell(self, attempt: int, reason: str) -> None:
        """Announce retry ``attempt`` (once)."""
        if attempt > self.told and self.sink is not None:
            self.told = attempt
            await self.sink(Retry(attempt, self.budget, reason))


_CALL: ContextVar[_Retries | None] = ContextVar("cove_llm_retries", default=None)


@dataclass(frozen=True)
class _Request:
    kind: CallKind
    response_format: ResponseFormat | None
    stream: bool
    stream_usage: bool
    reasoning_effort: str | None


class OpenAIClient:
    """An ``LLMClient`` for OpenAI-compatible endpoints (see the module docstring).

    Attributes:
        model: The model every request asks for.
    """

    def __init__(self, settings: ModelSettings, *, model: str | None = None) -> None:
        """Build a client for ``settings.base_url`` (OpenAI's API when None).

        Args:
            settings: Supplies base URL, API key, timeout, retry budget and reasoning switch.
            model: The model to ask for; ``settings.name`` when None.
        """
        self.model = model or settings.name
        self._settings = settings
        self._secret = settings.api_key or None
        self._secret_pattern = secret_pattern(self._secret)
        self._url = _without_userinfo(settings.base_url or DEFAULT_BASE_URL)
        self._support = _Support()
        self._closed = False
        self._lanes = Lanes(self._new_http_client)

    def _new_http_client(self) -> AsyncOpenAI:
        """A client of the endpoint with its own connection pool (one per lane)."""
        settings = self._settings
        hooks: dict[str, list[Any]] = {"request": [_on_request], "response": [_on_response]}
        return AsyncOpenAI(
            api_key=settings.api_key or PLACEHOLDER_API_KEY,
            base_url=settings.base_url or DEFAULT_BASE_URL,
            timeout=settings.request_timeout_s,
            max_retries=settings.max_retries,
            http_client=openai.DefaultAsyncHttpxClient(event_hooks=hooks),
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self._url!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        kind: CallKind = "iteration",
        reasoning: Reasoning = "balanced",
        on_delta: DeltaSink | None = None,
        options: Mapping[str, ModelOption] | None = None,
        on_retry: RetrySink | None = None,
    ) -> Completion:
        """Send one chat request and return the reply (see ``LLMClient.complete``).

        Raises:
            ModelError: After the retries are exhausted, on a non-retryable error, or when the
                client is closed. ``status`` is the last HTTP status (None without one).
        """
        if self._closed:
            raise ModelError("the LLM client is closed")
        retries = _Retries(on_retry, self._settings.max_retries)
        token = _CALL.set(retries)
        try:
            with self._lanes.lane() as client:
                return await self._call(
                    client, messages, kind, reasoning, on_delta, options, retries
                )
        finally:
            _CALL.reset(token)

    async def _call(
        self,
        client: AsyncOpenAI,
        messages: Sequence[Message],
        kind: CallKind,
        reasoning: Reasoning,
        on_delta: DeltaSink | None,
        options: Mapping[str, ModelOption] | None,
        retries: _Retries,
    ) -> Completion:
        """``complete``'s rounds: features stepped down, replies that broke off sent again."""
        started = time.perf_counter()
        spent = 0  # attempts used up by earlier rounds of this call
        failure: tuple[ModelError, BaseException, int]
        while True:
            request = self._plan(kind, reasoning)
            retries.spent = spent
            try:
                text, usage = await self._send(
                    client,
                    request,
                    messages,
                    on_delta,
                    options or {},
                    retries=self._settings.max_retries - spent,
                )
            except openai.APIStatusError as exc:
                attempts = _attempts(exc.response.request)
                if exc.status_code in (400, 422) and self._step_down(exc, request):
                    spent += attempts - 1  # the rejection itself costs nothing
                    continue
                failure = self._status_error(exc), exc, spent + attempts
            except openai.APIError as exc:  # no response: the package has retried already
                failure = self._transport_error(exc), exc, spent + _attempts(exc.request)
            except _BrokenReply as broken:
                spent += broken.attempts
                if spent <= self._settings.max_retries:
                    await retries.tell(spent, "the reply broke off")
                    await self._pause(broken.error, spent)
                    continue
                failure = broken.error, broken.cause, spent
            else:
                return self._completion(text, usage, messages, started)
            # Raised outside the handlers, so the foreign exception is no implicit context.
            self._give_up(*failure)

    async def aclose(self) -> None:
        """Close the HTTP connections; later calls raise ``ModelError``."""
        if not self._closed:
            self._closed = True
            await self._lanes.aclose()

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _give_up(self, error: ModelError, cause: BaseException, attempts: int) -> NoReturn:
        """Raise ``error``, saying how many attempts were made when there was more than one."""
        if attempts > 1:
            error = ModelError(
                f"{error.message} (gave up after {attempts} attempts)",
                status=error.status,
                retryable=error.retryable,
            )
        # The foreign exception may quote the key (an echoing endpoint): drop it then.
        raise error from (None if self._leaks(cause) else cause)

    async def _pause(self, error: ModelError, spent: int) -> None:
        """Wait before sending again a request whose reply broke off (exponential backoff)."""
        delay = min(self._settings.retry_base_delay_s * 2 ** (spent - 1), BACKOFF_CAP_S)
        log.warning(
            "%s; retry %d/%d in %.2f s", error.message, spent, self._settings.max_retries, delay
        )
        await asyncio.sleep(delay)

    # -- one attempt ---------------------------------------------------------------------------

    async def probe(self, timeout_s: float = 5.0) -> tuple[bool, str]:
        """Check that the endpoint answers (``GET /models``); never raises.

        Returns:
            Whether it answered, and a one-line description without secrets.
        """
        try:
            client = self._lanes.first.with_options(timeout=timeout_s, max_retries=0)
            page = await client.models.list()
        except openai.APIStatusError as exc:
            return False, f"{self._url} answered HTTP {exc.status_code}: " + self._clean(
                str(exc.message)
            )
        except openai.APIError as exc:
            return False, f"{self._url} is unreachable: " + self._clean(str(exc))
        names = [m.id for m in page.data][:5]
        listed = ", ".join(names) if names else "no models listed"
        return True, f"{self._url} answered ({listed})"

    async def models(self, timeout_s: float = 10.0) -> list[str]:
        """The names of the models the endpoint lists (``GET /models``), sorted.

        Raises:
            ModelError: The endpoint failed or is unreachable (the message has no secrets).
        """
        try:
            page = await self._lanes.first.with_options(timeout=timeout_s).models.list()
        except openai.APIStatusError as exc:
            message = self._clean(str(exc.message))
            raise ModelError(
                f"{self._url} answered HTTP {exc.status_code}: {message}", status=exc.status_code
            ) from exc
        except openai.APIError as exc:
            raise ModelError(f"{self._url} is unreachable: " + self._clean(str(exc))) from exc
        return sorted(m.id for m in page.data)

    def _plan(self, kind: CallKind, reasoning: Reasoning) -> _Request:
        support = self._support
        effort = None
        if self._settings.reasoning_effort and support.reasoning_effort:
            effort = REASONING_EFFORT[reasoning]
        return _Request(
            kind=kind,
            response_format=support.response_format if kind == "iteration" else None,
            stream=support.stream,
            stream_usage=support.stream and support.stream_usage,
            reasoning_effort=effort,
        )

    async def _send(
        self,
        client: AsyncOpenAI,
        request: _Request,
        messages: Sequence[Message],
        on_delta: DeltaSink | None,
        options: Mapping[str, ModelOption],
        *,
        retries: int,
    ) -> tuple[str, Usage | None]:
        """One request, retried by the package ``retries`` times until a reply begins.

        The request goes through the package's own ``post`` (its headers, retries and errors)
        asking for the decoded JSON, not typed objects (see ``chunks``); a streamed reply's
        events are read from the response here (see ``stream``). ``client`` is the lane the
        call was given (see ``lanes``).

        Returns:
            The reply text and the endpoint's usage (None when it reported none).

        Raises:
            openai.APIError: The request failed before a reply began.
            _BrokenReply: The reply began but broke off, or its body is not JSON or of a shape
                no chat completion has.
        """
        if retries != self._settings.max_retries:
            client = client.with_options(max_retries=retries)
        # The turn's model options (temperature, max_tokens, ...) ride along with every request.
        body = {**self._body(request, messages), **options}
        if not request.stream:
            try:
                reply = await client.post(
                    "/chat/completions", cast_to=object, body=body, options=_REQUEST_OPTIONS
                )
                text, usage = reply_text(reply), usage_of(reply)
            except (json.JSONDecodeError, MalformedReply) as exc:
                raise _BrokenReply(self._garbled(exc), exc, attempts=1) from exc
            if text and on_delta is not None:
                await on_delta(text)
            return text, usage
        stream = await client.post(
            "/chat/completions",
            cast_to=object,
            body=body,
            options=_REQUEST_OPTIONS,
            stream=True,
            stream_cls=AsyncStream[object],
        )
        attempts = _attempts(stream.response.request)
        try:
            return await read_reply(stream.response, on_delta)
        except openai.APIError as exc:
            raise _BrokenReply(self._transport_error(exc), exc, attempts) from exc
        except (json.JSONDecodeError, MalformedReply) as exc:
            raise _BrokenReply(self._garbled(exc), exc, attempts) from exc

    def _body(self, request: _Request, messages: Sequence[Message]) -> dict[str, Any]:
        """The JSON body of a request, before the turn's model options."""
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        if request.response_format == "json_schema":
            body["response_format"] = JSON_SCHEMA_FORMAT
        elif request.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        if request.stream:
            body["stream"] = True
        if request.stream_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    def _completion(
        self, text: str, usage: Usage | None, messages: Sequence[Message], started: float
    ) -> Completion:
        estimated = usage is None
        if usage is None:
            usage = Usage(estimate_tokens(prompt_chars(messages)), estimate_tokens(len(text)))
        return Completion(
            text=text,
            usage=usage,
            model=self.model,
            duration_ms=(time.perf_counter() - started) * 1000,
            estimated=estimated,
        )

    # -- falling back --------------------------------------------------------------------------

    def _step_down(self, exc: openai.APIStatusError, request: _Request) -> bool:
        """Drop the feature a 400 rejected; False when the rejection names none we sent."""
        said = f"{exc.message} {exc.param or ''} {exc.code or ''}".lower()
        support = self._support
        if request.stream_usage and "stream_options" in said:
            support.stream_usage = False
            dropped = "stream_options"
        elif request.reasoning_effort and "reasoning" in said:
            support.reasoning_effort = False
            dropped = "reasoning_effort"
        elif request.response_format not in (None, "none") and (
            "response_format" in said or "json" in said or "schema" in said
        ):
            support.response_format = (
                "json_object" if request.response_format == "json_schema" else "none"
            )
            dropped = f"response_format {request.response_format}"
        elif request.stream and "stream" in said:
            support.stream = False
            dropped = "streaming"
        else:
            return False
        log.warning(
            "the model endpoint %s rejected %s; not sending it again (%s)",
            self._url,
            dropped,
            self._clean(exc.message),
        )
        return True

    # -- errors --------------------------------------------------------------------------------

    def _status_error(self, exc: openai.APIStatusError) -> ModelError:
        status = exc.status_code
        detail = exc.message
        if isinstance(exc.body, dict) and isinstance(exc.body.get("message"), str):
            detail = exc.body["message"]
        hint = ""
        if status in (401, 403):
            hint = " (check the API key: OPENAI_API_KEY)"
        elif status == 404:
            hint = f" (check the base URL and the model name {self.model!r})"
        return ModelError(
            self._clean(f"the model endpoint {self._url} answered {status}: {detail}{hint}"),
            status=status,
            retryable=status in _RETRYABLE_STATUS or status >= 500,
        )

    def _transport_error(self, exc: openai.APIError) -> ModelError:
        if isinstance(exc, openai.APITimeoutError):
            message = (
                f"the model endpoint {self._url} did not answer within "
                f"{self._settings.request_timeout_s:g} s"
            )
        elif isinstance(exc, openai.APIConnectionError):
            reason = str(exc.__cause__ or exc) or type(exc.__cause__).__name__
            message = f"cannot reach the model endpoint {self._url}: {reason}"
        else:
            message = f"the model endpoint {self._url} failed mid-reply: {exc.message}"
        return ModelError(self._clean(message), retryable=True)

    def _garbled(self, exc: ValueError) -> ModelError:
        what = str(exc) if isinstance(exc, MalformedReply) else "a body that is not valid JSON"
        return ModelError(f"the model endpoint {self._url} sent {what}", retryable=True)

    def _clean(self, text: str) -> str:
        """``text`` with the API key blanked out, however the endpoint echoed it."""
        return redact(text, self._secret_pattern)

    def _leaks(self, exc: BaseException) -> bool:
        if self._secret_pattern is None:
            return False
        body = getattr(exc, "body", None)
        return self._secret_pattern.search(f"{exc} {body!r} {exc.__cause__}") is not None


def secret_pattern(secret: str | None) -> re.Pattern[str] | None:
    """What finds ``secret`` in text, or None for a key too short to be a secret.

    A key of ``ANYWHERE_SECRET_CHARS`` or more matches anywhere; a shorter one only as a whole
    token (not next to a letter or digit), so a key like ``hunter22`` never blanks out part of
    another word. Keys shorter than ``MIN_SECRET_CHARS`` match nothing.
    """
    if not secret or len(secret) < MIN_SECRET_CHARS:
        return None
    if len(secret) >= ANYWHERE_SECRET_CHARS:
        return re.compile(re.escape(secret))
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])")


def redact(text: str, pattern: re.Pattern[str] | None) -> str:
    """``text`` with every match of ``pattern`` (see ``secret_pattern``) replaced."""
    return text if pattern is None else pattern.sub(_REDACTED, text)


class _SentRequest(Protocol):
    """The part of an HTTP request (as the ``openai`` package reports it) read here."""

    @property
    def headers(self) -> Mapping[str, str]: ...


class _Answer(Protocol):
    """The part of an HTTP response read by the retry hook."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def request(self) -> _SentRequest: ...


async def _on_request(request: _SentRequest) -> None:
    """Before each request: a retry the response hook could not foresee is told now."""
    retries = _CALL.get()
    if retries is None:
        return
    attempt = retries.spent + _attempts(request) - 1
    if attempt > 0 and not retries.answered:
        await retries.tell(attempt, "no response")
    retries.answered = False


async def _on_response(response: _Answer) -> None:
    """After each response's headers: a status the package retries is told before its wait."""
    retries = _CALL.get()
    if retries is None:
        return
    retries.answered = True
    attempt = retries.spent + _attempts(response.request)
    if attempt <= retries.budget and _retried(response):
        status = response.status_code
        words = _STATUS_WORDS.get(status, "server error" if status >= 500 else "")
        await retries.tell(attempt, f"{words} (HTTP {status})" if words else f"HTTP {status}")


def _retried(response: _Answer) -> bool:
    """Whether the ``openai`` package sends a request again after this response."""
    said = response.headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    try:
        wait = float(response.headers.get("retry-after", "0"))
    except ValueError:
        wait = 0.0
    if wait > MAX_RETRY_AFTER_S:
        return False
    status = response.status_code
    return status in _RETRYABLE_STATUS or status >= 500


def _attempts(request: _SentRequest) -> int:
    """How many attempts the ``openai`` package made, ``request`` being the last one."""
    try:
        return int(request.headers.get(RETRY_COUNT_HEADER, "0")) + 1
    except ValueError:
        return 1


def _without_userinfo(url: str) -> str:
    """The URL without ``user:password@``, so it can go into messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


async def probe_endpoint(settings: ModelSettings) -> tuple[bool, str]:
    """Check the configured endpoint answers; see ``OpenAIClient.probe``."""
    async with OpenAIClient(settings) as client:
        return await client.probe()


async def endpoint_models(settings: ModelSettings) -> list[str]:
    """The models the configured endpoint lists; see ``OpenAIClient.models``."""
    async with OpenAIClient(settings) as client:
        return await client.models()
