"""The dashboard as a product, in a real browser: the API's own docs with no network, a Task's
page of its own (its address, the back button), the UI in the user's language with labels
instead of identifiers, the owner of each Task for an operator, a phone layout on one line,
and an Action's whole output on demand.

The Tasks are made through ``relaystate.client`` against the same ``serve`` process, as a
program built on relaystate would; then people look at them in the browser.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from relaystate.client import Client
from tests.server.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Server,
    need_a_browser,
    serving,
    watched,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path) as srv:
        yield srv


def _user(server: Server, name: str, *extra: str) -> str:
    made = json.loads(
        server.cli("users", "create", name, *extra, "--json", "--store", server.store)
    )
    key: str = made["api_key"]
    return key


def _until_done(client: Client, task_id: str) -> None:
    deadline = time.monotonic() + 30
    while client.task(task_id).status != "done":
        assert time.monotonic() < deadline, client.task(task_id)
        time.sleep(0.1)


def test_docs_and_redoc_render_with_no_network(server: Server) -> None:
    """Swagger UI and ReDoc come from the app itself: every request outside the server is
    refused, and both pages still draw the API (its title, an operation, the Turn model)."""
    need_a_browser()
    from playwright.sync_api import Route, expect, sync_playwright

    server.start()
    ours = urlsplit(server.url).netloc
    refused: list[str] = []

    def only_ours(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("internetdisconnected")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            crashes = watched(page)
            page.route("**/*", only_ours)

            page.goto(server.url + "/docs")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("relaystate")
            turn = page.locator(
                ".opblock-summary-path", has_text="/v1/sessions/{session_id}/messages"
            )
            expect(turn.first).to_be_visible()
            models = page.locator("section.models .json-schema-2020-12__title")
            expect(models.filter(has_text=re.compile(r"^Turn$"))).to_have_count(1)

            page.goto(server.url + "/redoc")
            expect(page.locator("h1").first).to_contain_text("relaystate")
            expect(page.get_by_text("/v1/tasks/{task_id}/history").first).to_be_attached()
            assert crashes == [], crashes
        finally:
            browser.close()
    assert refused == [], f"the docs asked the internet for {refused}"


def test_a_task_page_in_the_users_language_with_its_owner_for_an_operator(
    server: Server, tmp_path: Path
) -> None:
    need_a_browser()
    from playwright.sync_api import Page, expect, sync_playwright

    alice = _user(server, "alice")
    bob = _user(server, "bob")
    ops = _user(server, "ops", "--admin")
    server.start()
    with Client(server.url, alice) as client:
        s = client.new_session().id
        first = client.say(s, "book a flight from Beijing to Shanghai")
        assert first.task is not None
        flight = first.task.id
        client.say(s, "Dec 9, economy, for Alice Wang")
        client.say(s, "yes")
        _until_done(client, flight)
    with Client(server.url, bob) as client:
        refund = client.say(client.new_session("zh").id, "我要退款")
        assert refund.task is not None and refund.task.type == "refund"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nscreenshots: {shots}")

    def sign_in(page: Page, key: str, who: str) -> None:
        page.goto(server.url + "/")
        page.fill("#key-input", key)
        page.click("#sign-in")
        expect(page.locator("#user-id")).to_have_text(who)

    def height(page: Page, selector: str) -> float:
        box: Any = page.evaluate(
            f"document.querySelector({selector!r}).getBoundingClientRect().toJSON()"
        )
        return float(box["height"])

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # 1. A browser that speaks Chinese: the UI, the greeting and the labels in Chinese.
            context = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900})
            page = context.new_page()
            crashes = watched(page)
            sign_in(page, alice, "alice")
            expect(page.locator("#chat-panel h2")).to_have_text("对话")
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
            greeting = page.locator("#chat-log .msg[data-greeting]")
            expect(greeting).to_contain_text("机票预订")
            expect(greeting).to_contain_text("退款")
            font: Any = page.evaluate("getComputedStyle(document.body).fontFamily")
            assert "Noto Sans CJK SC" in font, font
            row = page.locator(f"#task-list .task-row[data-task-id='{flight}']")
            expect(row.locator(".task-type")).to_have_text("机票预订")
            expect(row.locator(".badge")).to_have_text("已完成")
            expect(row.locator(".stage")).to_contain_text("已完成")
            expect(row.locator("dt").first).to_have_text("出发地")
            expect(row.locator(".owner")).to_have_count(0)  # her own Tasks: no owner shown
            expect(page.locator("#task-list")).not_to_contain_text("cabin_class")
            page.screenshot(path=shots / "01-zh-list.png", full_page=True)

            # 2. The Task's page has its own address; the chat stays beside it.
            row.locator(".task-open").click()
            task_page = page.locator("#task-page")
            expect(task_page).to_have_attribute("data-status", "done")
            assert page.url.endswith(f"#/tasks/{flight}"), page.url
            expect(page.locator("#tasks-panel")).to_be_hidden()
            expect(page.locator("#chat-panel")).to_be_visible()
            top = page.evaluate("document.querySelector('#task-page').getBoundingClientRect().top")
            assert top < 120, f"the Task's page starts {top} px down: it is not a page of its own"
            desktop = height(page, "body")
            page.screenshot(path=shots / "02-zh-task.png", full_page=True)

            # 3. The journal in people's words; bookkeeping folded away, still there.
            entries = page.locator("#timeline .timeline-entry")
            expect(entries.first).to_contain_text("出发地")
            folded = page.locator("#timeline details").last  # create_order's end: leases and all
            expect(folded).not_to_have_attribute("open", "")
            expect(folded.locator("li", has_text="lease_owner").first).to_be_hidden()
            folded.locator("summary").click()
            expect(folded.locator("li", has_text="updated_at").first).to_be_visible()

            # 4. The whole output of an Action on demand.
            search = page.locator("#actions-table tr", has_text="search_flights")
            output = search.locator("pre.output")
            clipped: Any = output.evaluate("e => e.scrollHeight > e.clientHeight")
            assert clipped, "the search's output fits in its box: the test shows nothing"
            search.locator("[data-testid=output-more]").click()
            expect(output).to_have_class(re.compile(r"\bfull\b"))
            whole: Any = output.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
            assert whole, "'show all' left the output clipped"
            expect(search.locator("[data-testid=output-more]")).to_have_text("收起")

            # 5. Back leaves the page, forward returns, its address opens it directly.
            page.click("#task-back")
            expect(task_page).to_be_hidden()
            expect(page.locator("#tasks-panel")).to_be_visible()
            assert "#/tasks/" not in page.url, page.url
            page.go_forward()
            expect(task_page).to_have_attribute("data-task-id", flight)
            direct = context.new_page()  # a new tab: the key is the other tab's alone
            direct.goto(f"{server.url}/#/tasks/{flight}")
            direct.fill("#key-input", alice)
            direct.click("#sign-in")
            expect(direct.locator("#task-page")).to_have_attribute("data-task-id", flight)
            expect(direct.locator("#task-page")).to_have_attribute("data-status", "done")
            direct.close()

            # 6. English on request: every word switches, labels included.
            page.select_option("#lang", "en")
            expect(page.locator("#chat-panel h2")).to_have_text("Chat")
            expect(page.locator("#task-back")).to_have_text("← Back")
            expect(page.locator("html")).to_have_attribute("lang", "en")
            expect(task_page.locator("h2")).to_have_text("flight booking")
            expect(task_page.locator(".badge").first).to_have_text("done")
            page.select_option("#lang", "zh")
            expect(page.locator("#chat-panel h2")).to_have_text("对话")

            # 7. A phone: the Task's page alone, the header on one line, nothing sideways.
            page.set_viewport_size({"width": 390, "height": 844})
            expect(page.locator("#chat-panel")).to_be_hidden()
            assert height(page, "header") <= 60, height(page, "header")
            wide: Any = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, f"the page is {wide} px wide on a 390 px phone"
            phone = height(page, "body")
            page.screenshot(path=shots / "03-zh-phone-task.png", full_page=True)
            page.click("#task-back")
            expect(page.locator("#chat-input")).to_be_visible()
            assert height(page, "header") <= 60, height(page, "header")
            page.screenshot(path=shots / "04-zh-phone-list.png", full_page=True)
            print(f"  Task view: {desktop:.0f} px on a desktop, {phone:.0f} px on a phone")
            assert crashes == [], crashes
            context.close()

            # 8. An operator sees every user's Tasks, each with its owner.
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            sign_in(page, ops, "ops (admin)")
            owners = page.locator("#task-list .task-row .owner")
            expect(owners).to_have_count(2)
            expect(page.locator(f".task-row[data-task-id='{flight}'] .owner")).to_have_attribute(
                "data-owner", "alice"
            )
            bob_row = page.locator(".task-row", has=page.locator(".owner[data-owner=bob]"))
            expect(bob_row.locator(".task-type")).to_have_text("refund")
            page.screenshot(path=shots / "05-operator-owners.png", full_page=True)
        finally:
            browser.close()
