"""The web UI for sources that sync a knowledge base (issue 43: js/sources.js, the Sources tab of
`#/kb/<id>` and a source's page `#/kb/<id>/sources/<source id>`) through the real
`quarry serve` (embedded assets) and a real Chromium (Playwright; fixtures in ui_support.py):

- as the machine's owner (a loopback server without ``--auth``): a folder source added through
  the dialog (a relative path and a bad mask first: the API's messages on their fields, nothing
  typed lost), synced right after adding, its report's counts on the card; edits, a rename and a
  deletion in the folder synced with "Sync now"; the source's page: state, the reports with
  their per-file lines (filtered by action), settings changed (a bad mask refused with the
  API's message, then a mask and a schedule saved), detached keeping its documents behind a
  confirmation; the same page in Chinese;
- a private Git repository served by ``git http-backend`` over loopback HTTP (test_sources.py's
  GitServer): a bad URL refused with the API's words, the repository added with a token that
  is never shown again, the credential forgotten (the next sync fails: the API's 502 message,
  a failed report, the source marked failing) and replaced (the sync succeeds again);
- a sync that outlives the request (``--request-timeout 1`` and a slow Git server): the page
  says it goes on on the server, polls, and shows its report when it is in;
- who reads a source's documents, set in the add dialog: a rule with a bad reader key refused
  with the API's words in the dialog's readers section (on the rule; nothing typed lost; the
  same in Chinese), then the source added with the mapping as typed (checked through the API);
  a source added without touching the section has no mapping;
- with ``--auth token``: an admin who is not the machine's owner is not offered the folder kind
  and gets the API's refusal for a Git repository at a local path; a read-only session sees
  the sources and their reports but no action it cannot take.

axe-core on the Sources tab, the add dialog and the source page; screenshots (light, dark,
phone).
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from test_sources import REPO_TOKEN, GitServer, push, write
from ui_support import allow_console, login, page_record

SECRET_KEY = "7a" * 32  # QUARRY_SECRET_KEY for the server that stores a credential
SLOW = 120_000  # ms: a sync and the conversions after it on a debug build on busy cores


def open_page(page, srv, path: str):
    page.goto(f"{srv.base}/{path}")
    expect(page.locator(".page[data-ready=true]")).to_be_attached()


def sources_tab(page):
    return page.get_by_role("tab", name=re.compile(r"^Sources"))


def source_card(page, where: str):
    return page.locator("[data-testid=source-card]").filter(has=page.get_by_role("link", name=where, exact=True))


def counts_of(box) -> dict[str, str]:
    """The count badges of a report (`data-count` → text)."""
    items = box.locator("[data-testid=report-counts] li")
    return {items.nth(i).get_attribute("data-count"): items.nth(i).inner_text() for i in range(items.count())}


def quiet(page):
    """Waits for toasts to fade (axe looks at the page itself)."""
    expect(page.locator("#toasts .toast")).to_have_count(0, timeout=15_000)


def no_sideways_scroll(page):
    width = page.evaluate("document.documentElement.scrollWidth")
    view = page.evaluate("window.innerWidth")
    assert width <= view + 1, f"the page scrolls sideways on a phone: {width} > {view}"


@pytest.fixture(scope="module")
def gitsrv(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui-git") / "repos"
    root.mkdir(parents=True)
    srv = GitServer(root)
    yield srv
    srv.stop()


# ---------------------------------------------------------------------------------------------
# A folder, as the machine's owner


def test_folder_source_add_sync_report_edit_detach(ui_page, ui_page_factory, ui_module_server, tmp_path, axe_check, shot):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("handbook", description="Team handbook, synced from a folder")
    folder = tmp_path / "handbook-folder"
    write(folder, {
        "intro.md": "# Intro\nWelcome aboard, zebra crossing.\n",
        "policies/leave.md": "# Leave\nTwenty-five days of quokka leave.\n",
        "policies/travel.md": "# Travel\nEconomy walrus class.\n",
        "logo.png": "not a document",
    })
    where = str(folder)

    open_page(page, srv, f"#/kb/{kb['id']}")
    # The sources' module is not part of the knowledge base's first screen: it loads with the tab.
    assert not [u for u in page_record(page).requests if "/assets/" in u and "sources" in u], page_record(page).requests
    sources_tab(page).click()
    expect(page.locator("[data-testid=add-source]").first).to_be_visible()
    assert [u for u in page_record(page).requests if u.endswith("/assets/js/sources.js")]
    expect(page.get_by_text("No sources sync this knowledge base yet")).to_be_visible()
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}/sources"

    # The dialog: the machine's owner is offered every kind; only the chosen kind's fields show.
    page.get_by_role("button", name="Add source").first.click()
    dialog = page.get_by_role("dialog", name="Add a source to “handbook”")
    expect(dialog.get_by_label("Clone URL")).to_be_visible()
    expect(dialog.get_by_text("Stored encrypted on the server and never shown again")).to_be_visible()
    dialog.get_by_text("S3 bucket", exact=True).click()
    expect(dialog.get_by_label("Clone URL")).to_be_hidden()
    expect(dialog.get_by_label("Secret access key")).to_be_visible()
    expect(dialog.get_by_label("Access key ID")).to_be_visible()
    dialog.get_by_text("Folder on the server", exact=True).click()
    path = dialog.get_by_label("Path on the server")
    expect(path).to_be_visible()
    expect(dialog.get_by_label("Bucket", exact=True)).to_be_hidden()
    expect(dialog.get_by_role("group", name="Credential (optional)")).to_be_hidden()
    # "Sync on change" is offered where the API describes `watch` for a folder.
    add_fields = srv.api("GET", "/api/v1/openapi.json")["components"]["schemas"]["AddSource"]["properties"]
    watch = dialog.get_by_label("Sync on change")
    expect(watch).to_be_visible() if "watch" in add_fields else expect(watch).to_be_hidden()
    quiet(page)
    axe_check(page, "source-add-dialog")
    shot(page, "source-add-dialog")

    # Bad inputs: the API's own words, on the field; nothing typed is lost.
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("Required: Path on the server.")).to_be_visible()
    path.fill("handbook-folder")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("must be given as an absolute path")).to_be_visible()
    expect(path).to_have_attribute("aria-invalid", "true")
    path.fill(where)
    mask = dialog.get_by_label("Files")
    mask.fill("/etc/**")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("must be relative to the collection folder")).to_be_visible()
    expect(mask).to_have_attribute("aria-invalid", "true")
    expect(path).to_have_value(where)
    assert srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/sources") == []
    mask.fill("")
    expect(dialog.get_by_label("Sync it right after adding")).to_be_checked()
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog).to_be_hidden()

    # Added and synced at once: the card shows the result and the latest report's counts.
    card = source_card(page, where)
    expect(card).to_be_visible()
    expect(card.locator("[data-testid=sync-result]")).to_contain_text("3 added, 0 changed", timeout=SLOW)
    expect(card.locator("[data-testid=latest-report]")).to_be_visible()
    assert counts_of(card.locator("[data-testid=latest-report]")) == {
        "added": "3 added", "changed": "0 changed", "renamed": "0 renamed",
        "deleted": "0 deleted", "unchanged": "0 unchanged", "skipped": "1 skipped",
    }
    expect(card).to_have_attribute("data-state", "ok")
    expect(card.locator("[data-testid=schedule]")).to_have_text("Only when asked")
    expect(card.locator("[data-testid=documents]")).to_have_text("3")
    expect(sources_tab(page)).to_have_text("Sources (1)")
    (s,) = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/sources")
    assert s["location"] == {"kind": "folder", "path": where} and s["mask"] == "**", s
    docs = srv.wait_documents(kb["id"], 3)
    assert sorted(d["file_name"] for d in docs) == ["intro.md", "policies/leave.md", "policies/travel.md"], docs
    quiet(page)
    axe_check(page, "kb-sources")
    shot(page, "kb-sources")

    # Edit, rename, delete, add in the folder; "Sync now" on the card reports each.
    time.sleep(0.05)
    write(folder, {"intro.md": "# Intro\nWelcome aboard, okapi crossing at noon.\n", "faq.md": "# FAQ\nAsk the axolotl.\n"})
    (folder / "policies/leave.md").rename(folder / "policies/time-off.md")
    (folder / "policies/travel.md").unlink()
    card.get_by_role("button", name=f"Sync now: {where}").click()
    expect(card.locator("[data-testid=sync-result]")).to_contain_text(
        "1 added, 1 changed, 1 renamed, 1 deleted, 0 unchanged, 1 skipped", timeout=SLOW
    )
    expect(page.locator("#toasts")).to_contain_text("Sync finished")
    expect(card.locator("[data-testid=latest-report] [data-count=renamed]")).to_have_text("1 renamed")

    # The source's page: its state, settings and reports.
    card.get_by_role("link", name=where, exact=True).click()
    expect(page.get_by_role("heading", level=1, name=where)).to_be_visible()
    expect(page.locator(".page[data-ready=true]")).to_be_attached()
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}/sources/{s['id']}"
    crumbs = page.get_by_role("navigation", name="Breadcrumb")
    expect(crumbs.get_by_role("link", name="handbook")).to_be_visible()
    summary = page.locator(".src-summary")
    expect(summary.locator("[data-testid=failures]")).to_have_text("0")
    expect(summary.locator("[data-testid=documents]")).to_have_text("3")
    reports = page.locator("[data-testid=report]")
    expect(reports).to_have_count(2)
    newest = reports.first
    expect(newest).to_have_attribute("data-status", "succeeded")
    lines = newest.locator("[data-testid=report-line]")
    expect(lines).to_have_count(5)  # open by default: the newest report's lines
    expect(newest.locator("[data-testid=report-line][data-action=renamed]")).to_contain_text("was policies/leave.md")
    expect(newest.locator("[data-testid=report-line][data-action=renamed]")).to_contain_text("policies/time-off.md")
    expect(newest.locator("[data-testid=report-line][data-action=deleted]")).to_contain_text("policies/travel.md")
    expect(newest.locator("[data-testid=report-line][data-action=changed]")).to_contain_text("intro.md")
    expect(newest.locator("[data-testid=report-line][data-action=added]")).to_contain_text("faq.md")
    skipped = newest.locator("[data-testid=report-line][data-action=skipped]")
    expect(skipped).to_contain_text("logo.png")
    expect(skipped).to_contain_text("not a format Quarry converts")
    newest.get_by_label("Show").select_option("skipped")
    expect(lines).to_have_count(1)
    newest.get_by_label("Show").select_option("")
    expect(lines).to_have_count(5)
    # The older report opens on demand (keyboard: its summary is a native <details>).
    older = reports.nth(1)
    older.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(older.locator("[data-testid=report-line][data-action=added]")).to_have_count(3)
    expect(page.locator("main")).not_to_contain_text("null")
    expect(page.locator("main")).not_to_contain_text("undefined")
    # A folder takes no credential: no credential form.
    expect(page.get_by_test_id("credential-form")).to_have_count(0)

    # Settings: a bad mask is refused with the API's message (what was typed stays); then saved.
    form = page.get_by_test_id("settings-form")
    form.get_by_label("Files").fill("docs/[abc")
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_text("invalid glob mask")).to_be_visible()
    expect(form.get_by_label("Files")).to_have_value("docs/[abc")
    expect(form.get_by_label("Files")).to_have_attribute("aria-invalid", "true")
    assert srv.api("GET", f"/api/v1/sources/{s['id']}")["mask"] == "**"
    form.get_by_label("Files").fill("**/*.md")
    form.get_by_label("Schedule").select_option(label="Every hour")
    form.get_by_role("button", name="Save").click()
    expect(page.locator("#toasts")).to_contain_text("Source settings saved")
    expect(summary.locator("[data-testid=schedule]")).to_have_text("Every hour")
    expect(summary.locator("[data-testid=next-sync]")).to_contain_text("in ")
    got = srv.api("GET", f"/api/v1/sources/{s['id']}")
    assert (got["mask"], got["interval_seconds"]) == ("**/*.md", 3600), got
    # A custom schedule: whole minutes only, checked before any request.
    form.get_by_label("Schedule").select_option(label="Every … minutes")
    minutes = form.get_by_label("Minutes between syncs")
    minutes.fill("0")
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_text("Enter a whole number of minutes")).to_be_visible()
    minutes.fill("30")
    form.get_by_role("button", name="Save").click()
    expect(summary.locator("[data-testid=schedule]")).to_have_text("Every 30 minutes")
    assert srv.api("GET", f"/api/v1/sources/{s['id']}")["interval_seconds"] == 1800
    quiet(page)
    axe_check(page, "source-page")
    shot(page, "source-page")
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1280, "height": 860})

    # The same page in Chinese (every string translated: a missing key is a console error).
    zh = ui_page_factory(locale="zh-CN")
    open_page(zh, srv, f"#/kb/{kb['id']}/sources/{s['id']}")
    expect(zh.get_by_role("heading", name="同步报告")).to_be_visible()
    expect(zh.locator("[data-testid=report]").first.locator("[data-count=renamed]")).to_have_text("重命名 1")
    expect(zh.get_by_role("button", name="立即同步：" + where)).to_be_visible()
    shot(zh, "source-page-zh")

    # Detach: cancelled first, then confirmed keeping the documents.
    page.get_by_test_id("detach").click()
    confirm = page.get_by_role("dialog", name="Detach this source")
    expect(confirm.get_by_text("Its 3 documents")).to_be_visible()
    expect(confirm.get_by_label(re.compile("Delete them from the knowledge base"))).to_be_checked()
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    page.get_by_test_id("detach").click()
    confirm = page.get_by_role("dialog", name="Detach this source")
    confirm.get_by_label(re.compile("Keep them as ordinary documents")).check()
    confirm.get_by_role("button", name="Detach").click()
    expect(page.locator("#toasts")).to_contain_text("its 3 documents were kept")
    expect(sources_tab(page)).to_have_attribute("aria-selected", "true")
    expect(page.get_by_text("No sources sync this knowledge base yet")).to_be_visible()
    assert page.evaluate("location.hash") == f"#/kb/{kb['id']}/sources"
    assert srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/sources") == []
    assert sorted(d["file_name"] for d in srv.documents(kb["id"])) == ["faq.md", "intro.md", "policies/time-off.md"]


# ---------------------------------------------------------------------------------------------
# A private Git repository with a credential


def test_git_source_credential_failure_and_recovery(ui_page, ui_server_factory, gitsrv, axe_check, shot):
    srv = ui_server_factory(env={"QUARRY_SECRET_KEY": SECRET_KEY})
    page = ui_page
    work = gitsrv.repo("private/guide.git", {
        "README.md": "# Guide\nThe heron guide.\n",
        "docs/setup.md": "# Setup\nInstall the capybara toolkit.\n",
        "docs/usage.md": "# Usage\nRun the tapir command.\n",
        "src/main.rs": "fn main() {}\n",
    })
    url = gitsrv.url("private/guide.git")
    kb = srv.create_kb("guide")
    open_page(page, srv, f"#/kb/{kb['id']}/sources")
    page.get_by_role("button", name="Add source").first.click()
    dialog = page.get_by_role("dialog", name="Add a source to “guide”")
    # A bad URL: the API's message on the URL field; the branch and folder typed stay.
    dialog.get_by_label("Clone URL").fill("ftp://example.com/guide.git")
    dialog.get_by_label("Branch").fill("main")
    dialog.get_by_label("Folder in the repository").fill("docs")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("unsupported Git location")).to_be_visible()
    expect(dialog.get_by_label("Clone URL")).to_have_attribute("aria-invalid", "true")
    expect(dialog.get_by_label("Branch")).to_have_value("main")
    # A user name without its token is caught before any request.
    dialog.get_by_label("Clone URL").fill(url)
    dialog.get_by_label("User name").fill("x-access-token")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("Enter the token or password that goes with the user name.")).to_be_visible()
    dialog.get_by_label("Access token or password").fill(REPO_TOKEN)
    expect(dialog.get_by_label("Access token or password")).to_have_attribute("type", "password")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog).to_be_hidden()

    where = f"{url}#main:docs"
    card = source_card(page, where)
    expect(card.locator("[data-testid=sync-result]")).to_contain_text("2 added", timeout=SLOW)
    expect(card.locator("[data-testid=credential]")).to_have_text("Stored (encrypted)")
    (s,) = srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/sources")
    assert s["has_secret"] is True and REPO_TOKEN not in str(s), s
    assert REPO_TOKEN not in page.content()

    # The source's page: the credential is stored, never shown; the revision synced is.
    card.get_by_role("link", name=where, exact=True).click()
    expect(page.get_by_role("heading", level=1, name=where)).to_be_visible()
    expect(page.get_by_test_id("credential-state")).to_contain_text("A credential is stored, encrypted")
    expect(page.locator("[data-testid=report]").first.locator(".src-rev")).to_have_text(re.compile(r"^[0-9a-f]{12}$"))
    assert REPO_TOKEN not in page.content()

    # Forgotten: the next sync fails at the source — the API's message, a failed report kept,
    # the source marked failing.
    page.get_by_test_id("forget-credential").click()
    page.get_by_role("dialog", name="Please confirm").get_by_role("button", name="Forget credential").click()
    expect(page.get_by_test_id("credential-state")).to_contain_text("No credential is stored")
    assert srv.api("GET", f"/api/v1/sources/{s['id']}")["has_secret"] is False
    write(work, {"docs/faq.md": "# FAQ\nAsk the ibis.\n"})
    push(work)
    # The API answers a sync that failed at the source with 502, which the browser logs itself.
    allow_console(page, r"status of 502 \(Bad Gateway\)$")
    page.get_by_test_id("sync-now").click()
    error = page.get_by_test_id("sync-error")
    expect(error).to_contain_text(f"the sync of source {s['id']} failed", timeout=SLOW)
    expect(error).not_to_contain_text("{")  # the API's words, not its JSON
    failed = page.locator("[data-testid=report]").first
    expect(failed).to_have_attribute("data-status", "failed")
    expect(page.locator(".src-summary")).to_have_attribute("data-state", "failing")
    expect(page.get_by_test_id("source-failing")).to_contain_text("The last sync failed.")
    expect(page.get_by_test_id("last-error")).not_to_be_empty()
    failed.locator("summary").click()
    expect(failed.get_by_test_id("report-error")).to_be_visible()
    quiet(page)
    axe_check(page, "source-page-failing")
    shot(page, "source-page-failing")

    # Replaced: the sync succeeds again and only the new file is added.
    cred = page.get_by_test_id("credential-form")
    cred.get_by_label("Access token or password").fill(REPO_TOKEN)
    cred.get_by_role("button", name="Save credential").click()
    expect(page.get_by_test_id("credential-state")).to_contain_text("A credential is stored")
    expect(cred.get_by_label("Access token or password")).to_have_value("")
    page.get_by_test_id("sync-now").click()
    expect(page.get_by_test_id("sync-result")).to_contain_text("1 added, 0 changed", timeout=SLOW)
    expect(page.locator(".src-summary")).to_have_attribute("data-state", "ok")
    expect(page.get_by_test_id("source-failing")).to_have_count(0)
    expect(page.locator("[data-testid=report]")).to_have_count(3)
    assert REPO_TOKEN not in page.content()

    # The knowledge base's page shows the source's latest report.
    page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="Sources").click()
    card = source_card(page, where)
    expect(card.locator("[data-testid=latest-report] [data-count=added]")).to_have_text("1 added")
    expect(card).to_have_attribute("data-state", "ok")
    quiet(page)
    shot(page, "kb-sources-git")


def test_a_sync_longer_than_a_request_goes_on_and_its_report_shows(ui_page, ui_server_factory, gitsrv):
    srv = ui_server_factory("--request-timeout", "1")
    gitsrv.repo("slow.git", {"a.md": "# A\nThe albatross.\n", "b.md": "# B\nThe bittern.\n"})
    kb = srv.create_kb("slow")
    s = srv.api("POST", f"/api/v1/knowledge-bases/{kb['id']}/sources", {"kind": "git", "url": gitsrv.url("slow.git")})
    page = ui_page
    open_page(page, srv, f"#/kb/{kb['id']}/sources/{s['id']}")
    expect(page.get_by_text("No sync has run yet. Press “Sync now” to run the first one.")).to_be_visible()
    expect(page.locator(".src-summary")).to_have_attribute("data-state", "never")
    gitsrv.slow = 1.5  # each request of the fetch: the sync outlives the 1 s request limit
    try:
        page.get_by_test_id("sync-now").click()
        # 408 (Chromium sends a POST answered 408 once more, on a new connection: that one is
        # refused with 409 while the first runs); either way the page says it goes on.
        expect(page.get_by_test_id("sync-info")).to_contain_text(
            re.compile(r"it goes on on the server|a sync of source \S+ is already running"), timeout=SLOW
        )
        expect(page.get_by_test_id("sync-error")).to_have_count(0)
        # The page polls: the report is running, then in.
        newest = page.locator("[data-testid=report]").first
        expect(newest).to_have_attribute("data-status", "succeeded", timeout=SLOW)
    finally:
        gitsrv.slow = 0
    expect(newest.locator("[data-count=added]")).to_have_text("2 added")
    expect(page.locator(".src-summary")).to_have_attribute("data-state", "ok")
    expect(page.locator(".src-summary [data-testid=documents]")).to_have_text("2")


# ---------------------------------------------------------------------------------------------
# Remote callers: an admin who is not the machine's owner, a read-only session


def test_remote_admin_and_read_only_session(ui_page_factory, ui_server_factory, tmp_path, axe_check):
    srv = ui_server_factory("--auth", "token")
    srv.add_user("erin", role="owner")
    kb = srv.create_kb("policies", token=srv.token("erin"))
    folder = tmp_path / "policies"
    write(folder, {"leave.md": "# Leave\nTwenty-five days.\n", "notes.bin": "binary"})
    # Attached and synced by the machine's owner (the CLI on the server).
    added = srv.cli_json("source", "add", "policies", "--folder", str(folder))
    srv.cli_json("source", "sync", added["id"], "--no-wait")

    # An admin over the network: no folder kind; a Git repository at a local path is refused
    # with the API's words.
    admin = ui_page_factory()
    login(admin, srv.base, srv.token("erin"))
    open_page(admin, srv, f"#/kb/{kb['id']}/sources")
    expect(source_card(admin, str(folder))).to_be_visible()
    admin.get_by_role("button", name="Add source").first.click()
    dialog = admin.get_by_role("dialog", name="Add a source to “policies”")
    expect(dialog.get_by_text("Folder on the server", exact=True)).to_have_count(0)
    expect(dialog.get_by_test_id("folder-owner-only")).to_be_visible()
    dialog.get_by_label("Clone URL").fill("/srv/repos/handbook.git")
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog.get_by_text("reads the server's own disk: only the machine's owner may attach one")).to_be_visible()
    expect(dialog.get_by_label("Clone URL")).to_have_value("/srv/repos/handbook.git")
    dialog.get_by_role("button", name="Cancel").click()

    # Read-only: the sources, their state and reports; no action.
    viewer = ui_page_factory()
    login(viewer, srv.base, srv.token("erin", "--read-only"))
    open_page(viewer, srv, f"#/kb/{kb['id']}/sources")
    card = source_card(viewer, str(folder))
    expect(card.locator("[data-testid=latest-report] [data-count=added]")).to_have_text("1 added")
    expect(card.locator("[data-testid=latest-report] [data-count=skipped]")).to_have_text("1 skipped")
    expect(viewer.get_by_role("button", name="Add source")).to_have_count(0)
    expect(card.get_by_test_id("sync-now")).to_have_count(0)
    quiet(viewer)
    axe_check(viewer, "kb-sources-read-only")
    card.get_by_role("link", name=str(folder), exact=True).click()
    expect(viewer.get_by_role("heading", level=1, name=str(folder))).to_be_visible()
    expect(viewer.locator("[data-testid=report]")).to_have_count(1)
    expect(viewer.locator("[data-testid=report-line][data-action=skipped]")).to_contain_text("notes.bin")
    expect(viewer.get_by_test_id("sync-now")).to_have_count(0)
    expect(viewer.get_by_test_id("detach")).to_have_count(0)
    expect(viewer.get_by_test_id("settings-form")).to_have_count(0)
    expect(viewer.locator(".src-settings")).to_contain_text("Only when asked")
    # The API agrees: a read-only caller may not sync.
    r = srv.http("POST", f"/api/v1/sources/{added['id']}/sync", token=srv.token("erin", "--read-only"))
    assert r.status == 403, r.text


# ---------------------------------------------------------------------------------------------
# Who reads a source's documents, set in the add dialog


def add_error(srv, kb_id: str, body: dict) -> str:
    """The API's own words for an add it refuses (nothing is added)."""
    r = srv.http("POST", f"/api/v1/knowledge-bases/{kb_id}/sources", body=body)
    assert 400 <= r.status < 500, (r.status, r.text)
    return r.json()["detail"]


def test_add_dialog_sets_a_reader_mapping(ui_page, ui_module_server, tmp_path, axe_check):
    page, srv = ui_page, ui_module_server
    kb = srv.create_kb("readers-dialog")
    folder = tmp_path / "readers-folder"
    write(folder, {"hr/pay.md": "# Pay\nBands of the ibis team.\n", "public/hello.md": "# Hello\nWelcome.\n"})
    where = str(folder)
    sources_url = f"/api/v1/knowledge-bases/{kb['id']}/sources"

    open_page(page, srv, f"#/kb/{kb['id']}/sources")
    page.get_by_role("button", name="Add source").first.click()
    dialog = page.get_by_role("dialog", name="Add a source to “readers-dialog”")
    dialog.get_by_text("Folder on the server", exact=True).click()
    dialog.get_by_label("Path on the server").fill(where)
    readers = dialog.get_by_role("group", name="Who reads its documents (optional)")
    expect(readers).to_be_visible()
    # No rule yet: no mapping would be sent (every reader of the knowledge base).
    expect(readers.get_by_test_id("readers-rule-row")).to_have_count(0)
    readers.get_by_role("button", name="Add a rule").click()
    expect(readers.get_by_label("Paths of rule 1")).to_be_focused()
    readers.get_by_label("Paths of rule 1").fill("hr/**")
    readers.get_by_label("Readers of rule 1").fill("hr")  # not a reader key: no user: or group:
    readers.get_by_role("button", name="Add a rule").click()
    readers.get_by_label("Paths of rule 2").fill("public/**")
    readers.get_by_label("Readers of rule 2").fill("everyone")
    readers.get_by_label("Use the source's CODEOWNERS file").check()
    dialog.get_by_label("Sync it right after adding").uncheck()
    quiet(page)
    axe_check(page, "source-add-dialog-readers")

    # A bad key: the API's own words in the readers section, on the rule; nothing typed lost.
    bad = {"rules": [{"paths": "hr/**", "readers": ["hr"]}, {"paths": "public/**", "readers": ["everyone"]}], "codeowners": True}
    detail = add_error(srv, kb["id"], {"kind": "folder", "path": where, "readers": bad})
    assert "is not a reader" in detail, detail
    dialog.get_by_role("button", name="Add source").click()
    expect(readers.get_by_test_id("readers-error")).to_have_text(detail)
    expect(dialog.get_by_test_id("form-error")).to_have_text("")
    expect(readers.get_by_label("Readers of rule 1")).to_have_attribute("aria-invalid", "true")
    expect(readers.get_by_label("Readers of rule 1")).to_be_focused()
    expect(readers.get_by_label("Paths of rule 2")).not_to_have_attribute("aria-invalid", "true")
    expect(dialog.get_by_label("Path on the server")).to_have_value(where)
    expect(readers.get_by_label("Paths of rule 1")).to_have_value("hr/**")
    expect(readers.get_by_label("Readers of rule 1")).to_have_value("hr")
    expect(readers.get_by_label("Paths of rule 2")).to_have_value("public/**")
    expect(readers.get_by_label("Readers of rule 2")).to_have_value("everyone")
    expect(readers.get_by_label("Use the source's CODEOWNERS file")).to_be_checked()
    assert srv.api("GET", sources_url) == []

    # Fixed: the source is added with the mapping as typed (an empty row is left out).
    readers.get_by_label("Readers of rule 1").fill("group:hr, user:ann")
    readers.get_by_role("button", name="Add a rule").click()
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog).to_be_hidden()
    card = source_card(page, where)
    expect(card.locator("[data-testid=readers-mapping]")).to_have_text("2 rules · CODEOWNERS")
    (s,) = srv.api("GET", sources_url)
    got = srv.api("GET", f"/api/v1/sources/{s['id']}")["readers"]
    assert got == {
        "rules": [
            {"paths": "hr/**", "readers": ["group:hr", "user:ann"]},
            {"paths": "public/**", "readers": ["everyone"]},
        ],
        "codeowners": True,
    }, got

    # A source added without touching the section has no mapping.
    other = tmp_path / "plain-folder"
    write(other, {"a.md": "# A\n"})
    page.get_by_role("button", name="Add source").first.click()
    dialog = page.get_by_role("dialog", name="Add a source to “readers-dialog”")
    dialog.get_by_text("Folder on the server", exact=True).click()
    dialog.get_by_label("Path on the server").fill(str(other))
    dialog.get_by_label("Sync it right after adding").uncheck()
    dialog.get_by_role("button", name="Add source").click()
    expect(dialog).to_be_hidden()
    expect(source_card(page, str(other)).locator("[data-testid=readers-mapping]")).to_have_text("Everyone (no mapping)")
    plain = next(x for x in srv.api("GET", sources_url) if x["location"]["path"] == str(other))
    assert srv.api("GET", f"/api/v1/sources/{plain['id']}").get("readers") is None


def test_add_dialog_reader_error_in_chinese(ui_page_factory, ui_module_server, tmp_path):
    """The API's words about a bad rule, in Chinese (i18n/server.json), in the readers section."""
    page, srv = ui_page_factory(locale="zh-CN"), ui_module_server
    kb = srv.create_kb("readers-dialog-zh")
    folder = tmp_path / "zh-folder"
    write(folder, {"a.md": "# A\n"})
    open_page(page, srv, f"#/kb/{kb['id']}/sources")
    page.get_by_role("button", name="添加来源").first.click()
    dialog = page.get_by_role("dialog", name="为“readers-dialog-zh”添加来源")
    dialog.get_by_text("服务器上的文件夹", exact=True).click()
    dialog.get_by_label("服务器上的路径").fill(str(folder))
    readers = dialog.get_by_role("group", name="谁可以读取其文档（可选）")
    readers.get_by_role("button", name="添加规则").click()
    readers.get_by_label("规则 1 的路径").fill("hr/**")
    readers.get_by_label("规则 1 的读者").fill("group:hr, hr")
    dialog.get_by_role("button", name="添加来源").click()
    expect(readers.get_by_test_id("readers-error")).to_have_text("读者“hr”无效：请使用 user:<name>、group:<name> 或 everyone")
    expect(readers.get_by_label("规则 1 的读者")).to_have_attribute("aria-invalid", "true")
    expect(readers.get_by_label("规则 1 的读者")).to_have_value("group:hr, hr")
    assert srv.api("GET", f"/api/v1/knowledge-bases/{kb['id']}/sources") == []
