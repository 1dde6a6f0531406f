"""The dashboard in a real browser (Debian's /usr/bin/chromium driven by Playwright).

Alice signs in with her API key, books a flight through the chat panel, the server process
is restarted between two turns, she continues in the same page, watches the Task reach
``done`` with its Actions and journal shown, and moves the replay slider back to see the
Task as it was. Then she searches her memory (every chat turn is recorded in the namespace
``conversation``) and opens the Task's Context: the prompt its next turn would get within a
token budget and why each candidate was kept or dropped. Screenshots of every step go to the
test's tmp_path (printed), a phone-sized one at the end.

An operator's admin key sees the Operators panel (GET /v1/builds and /v1/workers): the
server's own Build and process, the open Task pinned to that Build and, once it ends, that
the Build may retire; a user's key never sees the panel.

Every page runs under its Content-Security-Policy (server/headers.py): the dashboard's flows
end asserting the page reported no violation, and that the key was kept in the tab's
sessionStorage only (never localStorage, not in another tab). Swagger UI and ReDoc run under
theirs too, and a page of another origin cannot frame any of them.

Never ``playwright install``: only the system Chromium is used. Without it the test skips;
under ``CI=true`` it fails instead, so CI cannot pass by skipping.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    WAIT_MS,
    Server,
    csp_watched,
    need_a_browser,
    serving,
    watched,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path) as srv:
        yield srv


def test_dashboard_books_a_flight_across_a_server_restart(server: Server, tmp_path: Path) -> None:
    need_a_browser()
    from playwright.sync_api import expect, sync_playwright

    started = time.monotonic()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nscreenshots: {shots}")
    key = json.loads(server.cli("users", "create", "alice", "--json", "--store", server.store))
    assert key["user_id"] == "alice"
    server.start()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            tabs = browser.new_context(viewport={"width": 1280, "height": 900})
            page = tabs.new_page()
            crashes = watched(page)
            violations = csp_watched(page)  # the whole flow runs under the page's strict CSP

            def shot(name: str, *, full_page: bool = True) -> None:
                page.screenshot(path=shots / f"{name}.png", full_page=full_page)
                print(f"  {time.monotonic() - started:5.1f} s  {name}")

            def say(text: str, reply: str | re.Pattern[str]) -> None:
                before = page.locator("#chat-log .msg-assistant").count()
                page.fill("#chat-input", text)
                page.click("#chat-send")
                answers = page.locator("#chat-log .msg-assistant")
                expect(answers).to_have_count(before + 1)
                expect(answers.last).to_contain_text(reply)
                expect(page.locator("#chat-input")).to_be_enabled()

            # 1. Sign in with the key. A key an older dashboard left in localStorage is
            # dropped, not used.
            page.goto(server.url + "/")
            page.evaluate(f"localStorage.setItem('relaystate.key', {key['api_key']!r})")
            page.reload()
            expect(page.locator("#sign-in-panel")).to_be_visible()
            assert page.evaluate("localStorage.getItem('relaystate.key')") is None
            shot("01-sign-in")
            page.fill("#key-input", "rsk_wrong_key")
            page.click("#sign-in")
            expect(page.locator("#error-banner")).to_contain_text("unauthorized")
            page.fill("#key-input", key["api_key"])
            page.click("#sign-in")
            expect(page.locator("#user-id")).to_have_text("alice")
            expect(page.locator("#error-banner")).to_be_hidden()
            expect(page.locator("#chat-panel")).to_be_visible()
            # The key is kept in this tab's sessionStorage only: nowhere in localStorage,
            # and another tab of the same browser is not signed in.
            kept: Any = page.evaluate("[JSON.stringify(localStorage), sessionStorage.length]")
            assert key["api_key"] not in kept[0] and kept[1] == 1, kept
            assert page.evaluate("sessionStorage.getItem('relaystate.key')") == key["api_key"]
            other = tabs.new_page()  # another tab of the same browser profile
            other.goto(server.url + "/")
            expect(other.locator("#sign-in-panel")).to_be_visible()
            expect(other.locator("#whoami")).to_be_hidden()
            other.close()
            shot("02-signed-in")

            # 2. Two turns: the Task collects its slots and asks for confirmation.
            say("book a flight from Beijing to Shanghai", "date")
            rows = page.locator("#task-list .task-row")
            expect(rows).to_have_count(1)
            row = rows.first
            expect(row).to_have_attribute("data-stage", "collecting")
            expect(row).to_have_attribute("data-status", "waiting_user")
            task_id = row.get_attribute("data-task-id")
            assert task_id
            session_id = page.locator("#session-id").inner_text()
            assert session_id != "new"
            shot("03-collecting")

            say("Dec 9, economy, for Alice Wang", re.compile(r"confirm.*9 December 2026", re.S))
            expect(row).to_have_attribute("data-stage", "confirming")
            expect(row.locator("dd[data-slot=passenger_name]")).to_have_text("Alice Wang")
            row.locator(".task-open").click()
            task_page = page.locator("#task-page")
            expect(task_page).to_be_visible()
            expect(task_page).to_have_attribute("data-task-id", task_id)
            expect(task_page).to_have_attribute("data-stage", "confirming")
            expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
            shot("04-task-page-confirming")

            # 3. Restart the server between two turns; the open page follows it.
            server.stop()
            expect(page.locator("#live-status")).not_to_have_attribute("data-state", "live")
            shot("05-server-down")
            server.start()
            assert len(set(server.pids)) == 2, server.pids
            expect(page.locator("#live-status")).to_have_attribute("data-state", "live")

            # 4. Continue in the same page: the new process finishes the booking.
            say("yes", re.compile(r"Done.*ORD-\d+", re.S))
            expect(page.locator("#session-id")).to_have_text(session_id)
            expect(task_page).to_have_attribute("data-status", "done")
            expect(task_page).to_have_attribute("data-stage", "done")
            expect(row).to_have_attribute("data-status", "done")
            expect(row.locator("progress")).to_have_attribute("value", "2")
            actions = page.locator("#actions-table .action-row")
            expect(actions).to_have_count(2)
            for name in ("search_flights", "create_order"):
                action = page.locator(f"#actions-table .action-row[data-action-name={name}]")
                expect(action).to_have_attribute("data-status", "success")
                expect(action).to_contain_text(f"{task_id}:")  # its idempotency key
            expect(page.locator("#actions-table")).to_contain_text("ORD-")
            entries = page.locator("#timeline .timeline-entry")
            expect(entries.first).to_contain_text("started flight_booking")
            expect(entries.last).to_contain_text("create_order succeeded")
            last = int(entries.last.get_attribute("data-version") or 0)
            assert last >= 5, f"the journal ends at version {last}"
            slider = page.locator("#timeline-slider")
            expect(slider).to_have_attribute("max", str(last))
            expect(slider).to_have_value(str(last))
            replayed = page.locator("#replayed-state")
            expect(replayed).to_have_attribute("data-stage", "done")
            date_row = page.locator("#slots-table .slot-row[data-slot=date]")
            expect(date_row).to_contain_text("v2: 2026-12-09")
            shot("06-done")

            # 5. Replay: the slider back to the first entry, then one step on.
            slider.focus()
            page.keyboard.press("Home")
            expect(replayed).to_have_attribute("data-version", "1")
            expect(replayed).to_have_attribute("data-stage", "collecting")
            expect(replayed).to_have_attribute("data-status", "waiting_user")
            expect(replayed).to_have_attribute("data-slot-count", "2")
            expect(replayed.locator("dd[data-slot=origin]")).to_have_text("Beijing")
            expect(replayed.locator("dd[data-slot=date]")).to_have_count(0)
            expect(page.locator("#timeline .timeline-entry.current")).to_have_attribute(
                "data-version", "1"
            )
            shot("07-replayed-v1")
            page.keyboard.press("ArrowRight")
            expect(replayed).to_have_attribute("data-version", "2")
            expect(replayed).to_have_attribute("data-stage", "confirming")
            expect(replayed).to_have_attribute("data-slot-count", "5")
            shot("08-replayed-v2")
            expect(task_page).to_have_attribute("data-status", "done")  # the live Task is not

            # 6. Memory search: her turns are in the namespace "conversation".
            page.click("#memory-link")
            expect(page.locator("#memory-query")).to_be_focused()
            expect(page.locator("#memory-namespace")).to_have_value("conversation")
            page.fill("#memory-query", "Shanghai")
            page.click("#memory-search")
            hits = page.locator("#memory-hits .hit")
            first_turn = hits.filter(has_text="book a flight from Beijing to Shanghai")
            expect(first_turn).to_have_count(1)
            expect(first_turn).to_have_attribute("data-role", "user")
            expect(first_turn.locator("mark")).to_have_text("Shanghai")
            expect(page.locator("#memory-status")).to_contain_text("for “Shanghai” in conversation")
            assert hits.count() >= 2, "the agent's confirmation mentions Shanghai too"
            shot("09-memory-search")
            # An empty namespace answers no hits; a namespace the API refuses shows its message.
            page.fill("#memory-namespace", "nothing-here")
            page.click("#memory-search")
            expect(page.locator("#memory-status")).to_have_text(
                "No hits for “Shanghai” in nothing-here (hybrid)."
            )
            expect(hits).to_have_count(0)
            page.fill("#memory-namespace", "n" * 201)
            page.click("#memory-search")
            expect(page.locator("#memory-error")).to_contain_text("invalid_input: path.namespace")
            page.fill("#memory-namespace", "conversation")
            page.select_option("#memory-mode", "keyword")
            page.click("#memory-search")
            expect(first_turn).to_have_count(1)
            expect(page.locator("#memory-error")).to_be_hidden()

            # The memory search left the Task's page; the browser's back button returns to it.
            expect(task_page).to_be_hidden()
            page.go_back()
            expect(task_page).to_be_visible()
            expect(task_page).to_have_attribute("data-status", "done")
            assert "#/tasks/" in page.url, page.url

            # 7. The Task's Context: the prompt within a budget, and every candidate's fate.
            page.click("#context-summary")
            usage = page.locator("#context-usage")
            expect(usage).to_contain_text("/ 1000 tokens")  # the default budget
            page.select_option("#context-budget", "500")
            expect(usage).to_contain_text("/ 500 tokens")
            prompt = page.locator("#context-prompt")
            expect(prompt).to_have_text(re.compile(r"^Task state:\n.*stage done", re.S))
            expect(prompt).to_contain_text("Recent turns:\nUser: book a flight")
            candidates = page.locator("#context-table tr.candidate")
            kept = page.locator("#context-table tr.candidate.kept")
            dropped = page.locator("#context-table tr.candidate.dropped")
            expect(kept.filter(has_text="task:state")).to_contain_text("kept: critical")
            expect(dropped.first).to_contain_text("dropped: duplicate of turn:")
            assert kept.count() >= 6 and dropped.count() >= 1, (kept.count(), dropped.count())
            tokens = int(page.locator("#context-result").get_attribute("data-tokens") or 0)
            assert 0 < tokens <= 500, tokens
            page.select_option("#context-layer", "recent")
            expect(candidates).to_have_count(6)  # the six turns of the conversation
            expect(
                page.locator("#context-table tr.candidate:not([data-layer=recent])")
            ).to_have_count(0)
            shot("10-context-500")
            # A budget too small for everything: candidates dropped as over budget.
            page.select_option("#context-layer", "")
            page.select_option("#context-budget", "100")
            expect(usage).to_contain_text("/ 100 tokens")
            expect(dropped.filter(has_text="over budget").first).to_be_visible()
            shot("11-context-100")

            # 8. A reload continues (the tab's sessionStorage): the key, the Session's
            # messages, the open Task.
            page.reload()
            expect(page.locator("#user-id")).to_have_text("alice")
            expect(page.locator("#chat-log .msg")).to_have_count(6)
            expect(page.locator("#chat-log .msg-user").first).to_have_text(
                re.compile("book a flight from Beijing to Shanghai")
            )
            expect(task_page).to_have_attribute("data-status", "done")
            shot("12-reloaded")
            page.set_viewport_size({"width": 390, "height": 844})
            # On a phone the Task's page is all there is; the header stays on one line.
            expect(page.locator("#chat-input")).to_be_hidden()
            header: Any = page.evaluate(
                "(() => { const r = document.querySelector('header').getBoundingClientRect();"
                " return r.height; })()"
            )
            assert header <= 60, f"the phone header is {header} px high: it wraps"
            shot("13-phone")
            # The Context and the memory search on the phone: stacked, nothing sideways.
            page.click("#context-summary")
            expect(prompt).to_have_text(re.compile(r"^Task state:"))
            top = "e => e.scrollIntoView({block: 'start'})"
            page.locator("#context-section").evaluate(top)
            shot("14-phone-context", full_page=False)
            page.click("#task-back")
            expect(page.locator("#chat-input")).to_be_visible()
            expect(task_page).to_be_hidden()
            # The header keeps to one line by leaving the panel links out: the panel is below.
            expect(page.locator("#memory-link")).to_be_hidden()
            page.locator("#memory-query").scroll_into_view_if_needed()
            page.fill("#memory-query", "Alice Wang")
            page.click("#memory-search")
            expect(hits.filter(has_text="for Alice Wang")).to_have_count(1)
            wide: Any = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, f"the page is {wide} px wide on a 390 px phone"
            page.locator("#memory-status").evaluate(top)
            shot("15-phone-memory", full_page=False)

            # 9. Sign out forgets the key.
            page.click("#sign-out")
            expect(page.locator("#sign-in-panel")).to_be_visible()
            stored: Any = page.evaluate(
                "[localStorage.getItem('relaystate.key'), sessionStorage.getItem('relaystate.key')]"
            )
            assert stored == [None, None], stored
            assert crashes == [], f"uncaught errors in the page: {crashes}"
            assert violations == [], f"the page broke its Content-Security-Policy: {violations}"
        finally:
            browser.close()
    server.stop()
    print(f"browser test: {time.monotonic() - started:.1f} s; screenshots in {shots}")


# The demo agents with the flight booking pinned: its Tasks run to their end on the Build
# that started them, so an open one keeps that Build from retiring.
PINNED_APP = """
from relaystate.demo import templates as demo

def templates():
    found = demo({ledger!r})
    for template in found:
        if template.type == "flight_booking":
            template.upgrade = "pinned"
    return found
"""


def test_operators_panel_shows_builds_and_workers_to_an_admin_key_only(tmp_path: Path) -> None:
    """An operator's key sees the Operators panel: the server's own Build and process (it
    registers itself), the open Task pinned to that Build, kept fresh every 5 s; a user's key
    never sees it, nor asks for it."""
    need_a_browser()
    from playwright.sync_api import Route, expect, sync_playwright

    started = time.monotonic()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"\nscreenshots: {shots}")
    (tmp_path / "pinned_app.py").write_text(PINNED_APP.format(ledger=str(tmp_path / "l.db")))
    server = Server(tmp_path, "--app", "pinned_app:templates", "--build", "b1")
    server.env["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    ops = json.loads(
        server.cli("users", "create", "ops", "--admin", "--json", "--store", server.store)
    )
    alice = json.loads(server.cli("users", "create", "alice", "--json", "--store", server.store))
    server.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                crashes = watched(page)
                violations = csp_watched(page)
                asked: list[str] = []  # every /v1/builds and /v1/workers request, in order
                page.on(
                    "request",
                    lambda r: (
                        asked.append(r.url) if re.search(r"/v1/(builds|workers)", r.url) else None
                    ),
                )

                def shot(name: str, *, full_page: bool = True) -> None:
                    page.screenshot(path=shots / f"{name}.png", full_page=full_page)
                    print(f"  {time.monotonic() - started:5.1f} s  {name}")

                def sign_in(key: str, who: str) -> None:
                    page.fill("#key-input", key)
                    page.click("#sign-in")
                    expect(page.locator("#user-id")).to_have_text(who)

                panel = page.locator("#ops-panel")
                builds = page.locator("#builds-table .build-row")
                workers = page.locator("#workers-table .worker-row")
                error = page.locator("#ops-error")

                # 1. A user's key: no panel, no link, no request for it. She starts a flight
                # booking (pinned, so it holds Build b1).
                page.goto(server.url + "/")
                sign_in(alice["api_key"], "alice")
                page.fill("#chat-input", "book a flight from Beijing to Shanghai")
                page.click("#chat-send")
                expect(
                    page.locator("#chat-log .msg-assistant:not([data-greeting])")
                ).to_contain_text("date")
                task_id = page.locator("#task-list .task-row").first.get_attribute("data-task-id")
                assert task_id
                expect(panel).to_be_hidden()
                expect(page.locator("#ops-link")).to_be_hidden()
                assert asked == [], asked
                shot("01-user-no-operators")
                page.click("#sign-out")

                # 2. An operator's key: the server's own Build and process, the pinned Task.
                sign_in(ops["api_key"], "ops (admin)")
                page.click("#ops-link")
                expect(panel).to_be_in_viewport()
                expect(builds).to_have_count(1)
                b1 = builds.first
                expect(b1).to_have_attribute("data-build", "b1")
                expect(b1.locator("td[data-label=Processes]")).to_have_text("1 api")
                expect(b1).to_have_attribute("data-pinned", "1")
                expect(b1).to_have_attribute("data-started", "1")
                expect(b1.locator("td[data-label='Pinned open Tasks']")).to_have_text("1")
                expect(b1.locator(".badge.retire-no")).to_have_text("no")
                expect(workers).to_have_count(1)
                me = workers.first
                assert server.proc is not None
                expect(me).to_have_attribute("data-role", "api")
                expect(me).to_have_attribute("data-build", "b1")
                expect(me).to_contain_text(f"pid {server.proc.pid}")
                expect(me.locator("td[data-label=Claimed]")).to_have_text("0")
                expect(me.locator("td[data-label='Heartbeat age']")).to_have_text(
                    re.compile(r"^\d+(\.\d)? s$")
                )
                worker_id = me.get_attribute("data-worker-id") or ""
                expect(me.locator("th code")).to_have_text(worker_id.rsplit("/", 1)[-1])
                expect(error).to_be_hidden()
                shot("02-operators")

                # 3. The Task ends elsewhere (her own key, over the API): within a refresh
                # period, and no click, the Build may retire.
                request = urllib.request.Request(
                    f"{server.url}/v1/tasks/{task_id}/cancel",
                    method="POST",
                    headers={"Authorization": f"Bearer {alice['api_key']}"},
                )
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.status == 200
                expect(b1).to_have_attribute("data-pinned", "0")
                expect(b1.locator(".badge.retire-yes")).to_have_text("yes")
                expect(b1).to_have_attribute("data-started", "0")
                shot("03-can-retire")

                # 4. States the live server cannot produce, answered in the browser: nothing
                # in service, and an error (its JSON message shown, the last tables kept).
                def empty(route: Route) -> None:
                    name = "builds" if "/v1/builds" in route.request.url else "workers"
                    route.fulfill(json={name: []})

                page.route(re.compile(r"/v1/(builds|workers)"), empty)
                page.click("#ops-refresh")
                expect(page.locator("#builds-empty")).to_have_text("No builds in service.")
                expect(page.locator("#workers-empty")).to_have_text("No workers registered.")
                expect(page.locator("#builds-table")).to_be_hidden()
                page.unroute(re.compile(r"/v1/(builds|workers)"))
                page.click("#ops-refresh")
                expect(builds).to_have_count(1)
                refused = {"error": {"code": "unavailable", "message": "the store is away"}}
                page.route(
                    re.compile(r"/v1/builds"),
                    lambda route: route.fulfill(status=503, json=refused),
                )
                page.click("#ops-refresh")
                expect(error).to_have_text("unavailable: the store is away")
                expect(builds).to_have_count(1)
                page.unroute(re.compile(r"/v1/builds"))
                page.click("#ops-refresh")
                expect(error).to_be_hidden()

                # 5. A restart: the panel says the server is away, then shows the new process;
                # "stopped ones too" shows the old one as stopped.
                server.stop()
                expect(error).to_contain_text("network: The server cannot be reached")
                server.start()
                expect(error).to_be_hidden()
                expect(me).to_contain_text(f"pid {server.proc.pid}")
                expect(workers).to_have_count(1)
                page.check("#workers-stopped")
                expect(workers).to_have_count(2)
                expect(
                    page.locator("#workers-table .worker-row[data-stopped=true]")
                ).to_contain_text("stopped")
                shot("04-restarted")

                # 6. A phone: the tables stacked, nothing sideways.
                page.set_viewport_size({"width": 390, "height": 844})
                expect(page.locator("#ops-link")).to_be_hidden()  # one header line on a phone
                page.locator("#ops-panel").evaluate("e => e.scrollIntoView({block: 'start'})")
                expect(b1).to_be_in_viewport()
                wide: Any = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= 390, f"the page is {wide} px wide on a 390 px phone"
                page.locator("#ops-panel").evaluate("e => e.scrollIntoView({block: 'start'})")
                shot("05-phone-operators", full_page=False)

                # 7. Signing out stops the refreshes; a user's key after an operator's: no panel.
                page.click("#sign-out")
                since = len(asked)
                sign_in(alice["api_key"], "alice")
                expect(panel).to_be_hidden()
                page.wait_for_timeout(5_500)  # longer than a refresh period
                assert asked[since:] == [], asked[since:]
                expect(page.locator("#error-banner")).to_be_hidden()
                assert crashes == [], f"uncaught errors in the page: {crashes}"
                assert violations == [], f"the page broke its CSP: {violations}"
            finally:
                browser.close()
        server.stop()
    finally:
        if server.proc is not None:
            server.proc.kill()
            server.proc.wait()
    print(f"operators test: {time.monotonic() - started:.1f} s; screenshots in {shots}")


def test_a_turn_whose_answer_is_lost_is_sent_again_with_its_key(server: Server) -> None:
    """The first answer to a turn is cut off after the server committed it (the browser
    sees a reset connection): the page sends the turn again with the same Idempotency-Key and
    shows the one reply the server committed; the session holds the words once."""
    need_a_browser()
    from playwright.sync_api import Route, expect, sync_playwright

    key = json.loads(server.cli("users", "create", "alice", "--json", "--store", server.store))
    server.start()
    sent: list[str] = []

    def lose_the_first_answer(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        sent.append(route.request.headers.get("idempotency-key", ""))
        if len(sent) == 1:
            route.fetch()  # the server gets the turn and commits it ...
            route.abort("connectionreset")  # ... and its answer never arrives
        else:
            route.continue_()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(WAIT_MS)
            expect.set_options(timeout=WAIT_MS)
            page.route(re.compile(r"/v1/sessions/[^/]+/messages$"), lose_the_first_answer)
            page.goto(server.url + "/")
            page.fill("#key-input", key["api_key"])
            page.click("#sign-in")
            expect(page.locator("#user-id")).to_have_text("alice")
            page.fill("#chat-input", "book a flight from Beijing to Shanghai")
            page.click("#chat-send")
            expect(page.locator("#chat-log .msg-assistant:not([data-greeting])")).to_have_count(1)
            expect(page.locator("#chat-log .msg-assistant").last).to_contain_text("date")
            expect(page.locator("#chat-log .msg-error")).to_have_count(0)
            session_id = page.locator("#session-id").inner_text()
        finally:
            browser.close()
    assert len(sent) == 2 and sent[0] == sent[1] and len(sent[0]) == 32, sent
    request = urllib.request.Request(
        f"{server.url}/v1/sessions/{session_id}/messages",
        headers={"Authorization": f"Bearer {key['api_key']}"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        messages = json.loads(answer.read())["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"], messages


def test_docs_run_under_their_policy_and_no_other_site_may_frame_a_page(server: Server) -> None:
    """Swagger UI draws the API and tries a call with no violation of its strict policy;
    ReDoc draws it with one refusal, by design: the logo its bundle names on Redocly's CDN.
    A page of another origin that frames the dashboard, the docs or a JSON answer gets an
    error page in each frame."""
    need_a_browser()
    from playwright.sync_api import expect, sync_playwright

    server.start()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            crashes = watched(page)
            violations = csp_watched(page)

            page.goto(server.url + "/docs")
            health = page.locator(".opblock", has_text="/healthz")
            health.locator(".opblock-summary").click()
            health.get_by_role("button", name="Try it out").click()
            health.get_by_role("button", name="Execute").click()
            answered = health.locator(".live-responses-table")
            expect(answered.locator("tbody .response-col_status")).to_have_text("200")
            expect(answered).to_contain_text('"status": "ok"')
            assert violations == [], f"Swagger UI broke its CSP: {violations}"

            page.goto(server.url + "/redoc")
            expect(page.locator("h1").first).to_contain_text("relaystate")
            page.get_by_placeholder("Search...").fill("healthz")
            expect(page.locator("[role=search] li").first).to_contain_text("Healthz")
            logo = "event: img-src refused https://cdn.redoc.ly/"
            for _ in range(100):  # the logo's refusal is reported as its footer renders
                if any(v.startswith(logo) for v in violations):
                    break
                page.wait_for_timeout(100)
            assert any(v.startswith(logo) for v in violations), violations
            refused = [v for v in violations if "https://cdn.redoc.ly/" not in v]
            assert refused == [], f"ReDoc broke its CSP: {violations}"
            assert crashes == [], crashes

            # Framed by another origin (a page of its own, about:blank's opaque origin).
            framing = browser.new_page()
            paths = ["/", "/docs", "/redoc", "/healthz"]
            frames = "".join(f'<iframe src="{server.url}{p}"></iframe>' for p in paths)
            framing.set_content(f"<!doctype html><body>{frames}</body>")
            framing.wait_for_load_state("load")
            inside = [f.url for f in framing.frames if f != framing.main_frame]
            assert len(inside) == len(paths), inside
            assert all(url.startswith("chrome-error://") for url in inside), inside
        finally:
            browser.close()
