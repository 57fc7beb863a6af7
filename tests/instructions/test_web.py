"""The web's settings panel and API for a conversation's instructions and model: Chromium
against the real app, the real ``openai`` client against the fake endpoint."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.channels.web.browser import Site, answer, browser, page, send, site  # noqa: F401
from tests.channels.web.serve import BEARER

pytestmark = pytest.mark.slow  # a real Chromium, real workers
ONE_BACKEND = True  # the store's backends are covered by test_instructions.py


def api(site: Site, method: str, path: str, **kw: Any) -> httpx.Response:  # noqa: F811
    return httpx.request(method, f"{site.url}{path}", headers=BEARER, timeout=30, **kw)


def test_the_profile_api_reads_sets_and_refuses_with_clear_errors(site: Site) -> None:  # noqa: F811
    site.fake.listed = ["fake-model", "big-model"]
    created = api(site, "POST", "/api/conversations", json={"instructions": "Be terse."})
    assert created.status_code == 201
    cid = created.json()["id"]
    profile = api(site, "GET", f"/api/conversations/{cid}/profile").json()
    assert profile["instructions"] == "Be terse." and profile["model"] is None
    assert (profile["configured_model"], profile["instructions_limit"]) == ("fake-model", 4000)
    assert api(site, "GET", "/api/models").json() == {
        "models": ["big-model", "fake-model"],
        "configured": "fake-model",
    }
    changed = api(site, "PUT", f"/api/conversations/{cid}/profile", json={"model": "big-model"})
    assert changed.json()["model"] == "big-model" and changed.json()["instructions"] == "Be terse."
    too_long = api(
        site, "PUT", f"/api/conversations/{cid}/profile", json={"instructions": "x" * 4001}
    )
    assert too_long.status_code == 422 and "4,001 characters" in too_long.json()["message"]
    unknown = api(site, "PUT", f"/api/conversations/{cid}/profile", json={"model": "nope"})
    assert unknown.status_code == 422 and "does not offer" in unknown.json()["message"]
    wrong = api(site, "PUT", f"/api/conversations/{cid}/profile", json={"colour": "red"})
    assert wrong.status_code == 422 and "unknown field(s): colour" in wrong.json()["message"]
    refused = api(site, "POST", "/api/conversations", json={"model": "nope", "text": "hi"})
    assert refused.status_code == 422
    site.fake.models_status = 404
    listing = api(site, "GET", "/api/models")
    assert listing.status_code == 502 and "404" in listing.json()["message"]
    kept = api(site, "GET", f"/api/conversations/{cid}/profile").json()
    assert (kept["instructions"], kept["model"]) == ("Be terse.", "big-model")
    assert len(api(site, "GET", "/api/conversations").json()["conversations"]) == 1


def test_the_settings_panel_gives_a_new_chat_its_instructions_and_model(
    site: Site,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    site.fake.listed = ["fake-model", "big-model"]
    site.fake.add_replies(answer("Aye."), answer("Still aye."))
    page.goto(f"{site.url}/")
    page.click("#settings summary")
    page.wait_for_selector("#model-picker option[value='big-model']", state="attached")
    page.fill("#instructions", "Talk like a pirate.")
    page.select_option("#model-picker", "big-model")
    send(page, "hello")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    cid = page.url.split("/c/", 1)[1]
    first = site.fake.requests[0]
    assert first["model"] == "big-model"
    assert "Talk like a pirate." in first["messages"][0]["content"]

    # Reopened, the panel shows the conversation's profile; too long is refused, kept typed.
    page.goto(f"{site.url}/c/{cid}")
    page.click("#settings summary")
    page.wait_for_function(
        "v => document.querySelector('#instructions').value === v", arg="Talk like a pirate."
    )
    assert page.input_value("#model-picker") == "big-model"
    page.fill("#instructions", "y" * 4001)
    assert page.text_content("#instructions-count") == "4001 / 4000"
    page.click("#settings-save")
    page.wait_for_selector("#settings-status.error")
    assert "4,001 characters" in page.text_content("#settings-status")
    assert page.input_value("#instructions") == "y" * 4001  # nothing lost
    page.fill("#instructions", "")
    page.select_option("#model-picker", "")
    page.click("#settings-save")
    page.wait_for_selector("#settings-status:text('Saved')")
    send(page, "again")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    second = site.fake.requests[1]
    assert second["model"] == "fake-model"
    assert "pirate" not in second["messages"][0]["content"]
    assert page.dialogs == []


def test_the_panel_says_when_the_endpoint_cannot_list_its_models(
    site: Site,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    cid = site.conversation()
    site.fake.models_status = 404
    page.goto(f"{site.url}/c/{cid}")
    page.click("#settings summary")
    page.wait_for_selector("#settings-status.error")
    assert "models cannot be listed" in page.text_content("#settings-status")
    # The instructions can still be set.
    page.fill("#instructions", "Short answers.")
    page.click("#settings-save")
    page.wait_for_selector("#settings-status:text('Saved')")
    profile = api(site, "GET", f"/api/conversations/{cid}/profile").json()
    assert profile["instructions"] == "Short answers."


def test_a_message_can_go_to_another_model_once(site: Site, page: Any) -> None:  # noqa: F811
    site.fake.listed = ["fake-model", "big-model"]
    site.fake.add_replies(answer("From big."), answer("From the usual."))
    cid = site.conversation()
    page.goto(f"{site.url}/c/{cid}")
    page.click("#settings summary")
    page.wait_for_selector("#model-picker option[value='big-model']", state="attached")
    page.select_option("#model-picker", "big-model")
    page.click("#settings-once")
    assert page.text_content("#once-name") == "big-model"
    send(page, "ask the big one")
    page.wait_for_selector("#turn-1[data-status='done'] .answer")
    assert page.is_hidden("#once-model")  # used once
    send(page, "and now the usual")
    page.wait_for_selector("#turn-2[data-status='done'] .answer")
    assert [r["model"] for r in site.fake.requests] == ["big-model", "fake-model"]
    profile = api(site, "GET", f"/api/conversations/{cid}/profile").json()
    assert profile["model"] is None  # the conversation's own model never changed
    unknown = api(
        site, "POST", f"/api/conversations/{cid}/messages", json={"text": "x", "model": "nope"}
    )
    assert unknown.status_code == 422 and "does not offer" in unknown.json()["message"]
    wrong = api(site, "POST", f"/api/conversations/{cid}/messages", json={"text": "x", "model": 7})
    assert wrong.status_code == 422 and "'model'" in wrong.json()["message"]
    assert len(site.fake.requests) == 2  # neither refused message ran
