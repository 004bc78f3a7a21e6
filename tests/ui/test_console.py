"""The console in headless Chromium against a real daemon: every page loads
without browser errors and shows what the API holds; the schedule form, log
following, cancel and egg upload do what they say."""

import json
import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import browser_errors, set_theme, unique, wait_css, wait_for, wait_text

API = "/api/v1"


def api(d, method, path, **kw):
    r = d.request(method, API + path, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def run_job(d, spider, settings=None, **args):
    return api(d, "POST", "/jobs", json={"project": "testproj", "spider": spider, "settings": settings or {},
                                          "args": {k: str(v) for k, v in args.items()}})


DEBUG = {"LOG_LEVEL": "DEBUG"}  # a line per request: a log that grows


def wait_state(d, job_id, states, seconds=60):
    def check():
        j = api(d, "GET", f"/jobs/{job_id}")
        return j if j["state"] in states else None
    return wait_for(check, seconds, f"job {job_id} in {states}", interval=0.2)


def open_page(drv, d, path):
    browser_errors(drv)  # drop what earlier pages logged
    drv.get(d.console + "/ui" + path)


def no_errors(drv, what):
    errs = browser_errors(drv)
    assert not errs, f"browser errors on {what}: " + json.dumps(errs, indent=1)


@pytest.fixture(scope="module")
def data(console):
    """Jobs in every end state worth showing, a schedule and a queue with a dead letter."""
    d = console
    done = run_job(d, "quick", count=4)
    crash = run_job(d, "crash")
    wait_state(d, done["id"], {"finished"})
    wait_state(d, crash["id"], {"failed"})
    sched = api(d, "POST", "/schedules", json={"name": unique("nightly"), "project": "testproj",
                                               "spider": "quick", "cron": "30 2 * * *", "tz": "Europe/Berlin"})
    q = unique("frontier")
    api(d, "PUT", f"/queues/{q}", json={"key_mode": "host", "max_deliveries": 1})
    api(d, "POST", f"/queues/{q}/put", json={"elements": ["http://a.example/1", "http://b.example/2"]})
    took = api(d, "POST", f"/queues/{q}/take", json={"max": 1})
    api(d, "POST", f"/queues/{q}/nack", json={"leases": [took["items"][0]["lease"]], "error": "HTTP 500"})
    return {"done": done, "crash": crash, "schedule": sched, "queue": q}


# page path -> (css selector, text it must show once loaded)
def pages(data):
    s, q = data["schedule"], data["queue"]
    return [
        ("overview", "/", "#recent-failures", f"#{data['crash']['id']}"),
        ("projects", "/projects", "#projects-table", "testproj"),
        ("project", "/projects/testproj", "#spider-list", "quick"),
        ("jobs", "/jobs", "table.jobs", f"#{data['done']['id']}"),
        ("jobs-filtered", "/jobs?state=failed", "table.jobs", f"#{data['crash']['id']}"),
        ("job", f"/jobs/{data['done']['id']}", "#items-table", "quick0"),
        ("schedules", "/schedules", "#schedules-table", s["name"]),
        ("schedule", f"/schedules/{s['id']}", "#runs-upcoming", ":30"),
        ("schedule-new", "/schedules/new", "#schedule-form", "Cron"),
        ("calendars", "/calendars", "#calendar-form", "Weekdays"),
        ("queues", "/queues", "#queues-table", q),
        ("queue", f"/queues/{q}", "#items-dead", "http://a.example/1"),
        ("events", "/events", "#events-table", "job.finished"),
        ("nodes", "/nodes", ".node", "testnode"),
        ("accounts", "/accounts", "#account-form", "New account"),
    ]


def test_pages_load_without_errors(console, browser, data, shot):
    d, drv = console, browser
    for theme in ("light", "dark"):
        for name, path, css, text in pages(data):
            open_page(drv, d, path)
            set_theme(drv, theme)
            try:
                wait_text(drv, css, text)
            except AssertionError:
                shot(drv, f"FAILED-{name}-{theme}")
                raise
            if name == "jobs-filtered":
                rows = drv.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
                assert rows and all("failed" in r.text for r in rows), [r.text for r in rows]
            time.sleep(0.3)  # charts and late requests settle
            no_errors(drv, f"{path} ({theme})")
            shot(drv, f"{name}-{theme}")
    # a phone's width: nothing wider than the screen but the tables' own scrollers
    size = drv.get_window_size()
    drv.set_window_size(390, 844)
    try:
        for name, path, css, text in pages(data):
            open_page(drv, d, path)
            wait_text(drv, css, text)
            over = drv.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert over <= 1, f"{path} is {over}px wider than a phone's screen"
            if name in ("overview", "jobs", "job", "schedule-new"):
                shot(drv, f"{name}-phone")
    finally:
        drv.set_window_size(size["width"], size["height"])
    # the rendered docs and the API reference
    open_page(drv, d, "/")
    drv.get(d.console + "/docs/")
    wait_text(drv, "main", "spiderd documentation")
    drv.find_element(By.LINK_TEXT, "spiderd's native API").click()
    wait_text(drv, "main h1", "native API")
    assert drv.current_url.endswith("/docs/api")
    # .md links point at pages, relatively (the docs hold behind a path prefix)
    link = drv.find_element(By.CSS_SELECTOR, "main a[href='queues']")
    assert link.get_attribute("href") == d.console + "/docs/queues"
    no_errors(drv, "/docs/")
    shot(drv, "docs-api")
    drv.get(d.console + "/api/")
    wait_text(drv, "#swagger-ui", "/api/v1/jobs", seconds=20)
    no_errors(drv, "/api/")
    shot(drv, "swagger")


def test_overview_counts_and_theme_toggle(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/")
    wait_text(drv, "#recent-failures", f"#{data['crash']['id']}")
    failed = wait_css(drv, "#count-failed")
    wait_for(lambda: failed.text not in ("…", "0"), 10, "failed count")
    # the toggle cycles system -> light -> dark and is remembered
    drv.execute_script("localStorage.removeItem('spiderd.theme')")
    drv.refresh()
    btn = wait_css(drv, "#theme-toggle")
    btn.click()
    btn.click()
    assert drv.execute_script("return document.documentElement.dataset.theme") == "dark"
    drv.refresh()
    wait_css(drv, "#theme-toggle")
    assert drv.execute_script("return document.documentElement.dataset.theme") == "dark"
    assert drv.execute_script("return localStorage.getItem('spiderd.theme')") == "dark"
    # "/" focuses the page's search box
    open_page(drv, d, "/jobs")
    wait_css(drv, "table.jobs")
    drv.find_element(By.TAG_NAME, "body").send_keys("/")
    assert drv.switch_to.active_element.get_attribute("id") == "job-search"
    no_errors(drv, "overview and jobs")


def test_schedule_form_creates_schedule(console, browser, data, shot):
    d, drv = console, browser
    open_page(drv, d, "/schedules/new")
    name = unique("ui")
    wait_css(drv, "#s-name").send_keys(name)
    wait_for(lambda: len(Select(drv.find_element(By.ID, "s-project")).options) > 1, 10, "projects")
    Select(drv.find_element(By.ID, "s-project")).select_by_visible_text("testproj")
    wait_for(lambda: len(Select(drv.find_element(By.ID, "s-spider")).options) > 1, 10, "spiders")
    Select(drv.find_element(By.ID, "s-spider")).select_by_visible_text("quick")
    tz = drv.find_element(By.ID, "s-tz")
    tz.send_keys(Keys.CONTROL, "a")
    tz.send_keys("Asia/Tokyo")
    drv.find_element(By.ID, "s-cron").send_keys("15 3 * * 1-5")
    wait_text(drv, "#cron-words", "03:15")
    wait_text(drv, "#cron-words", "Monday through Friday")
    preview = None
    try:  # the daemon's preview of the next runs, where it has one
        wait_css(drv, "#cron-next li", seconds=5)
        preview = [int(li.get_attribute("data-ms")) for li in drv.find_elements(By.CSS_SELECTOR, "#cron-next li")]
    except AssertionError:
        assert "cannot preview" in drv.find_element(By.CSS_SELECTOR, ".preview").text
    shot(drv, "schedule-form-preview")
    drv.find_element(By.ID, "s-save").click()
    wait_text(drv, "h1", f"Schedule {name}")
    s = api(d, "GET", f"/schedules/{name}")
    assert (s["cron"], s["tz"], s["project"], s["spider"]) == ("15 3 * * 1-5", "Asia/Tokyo", "testproj", "quick")
    runs = api(d, "GET", f"/schedules/{s['id']}/runs", params={"state": "upcoming", "limit": 10})["runs"]
    assert runs, "no upcoming runs"
    for r in runs:
        assert r["due"].endswith("+09:00") and "T03:15:00" in r["due"], r["due"]
    if preview:
        assert preview[:len(runs)] == [r["due_ms"] for r in runs][:len(preview)]
    # the page lists the same upcoming runs (times in the viewer's zone, UTC in the title)
    wait_css(drv, "#runs-upcoming li")
    titles = [t.get_attribute("title") for t in drv.find_elements(By.CSS_SELECTOR, "#runs-upcoming time")]
    assert titles and all("T18:15:00Z UTC" in t for t in titles), titles
    no_errors(drv, "schedule form")


def test_bad_cron_shows_the_api_error(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/schedules/new")
    wait_css(drv, "#s-name").send_keys(unique("bad"))
    wait_for(lambda: len(Select(drv.find_element(By.ID, "s-project")).options) > 1, 10, "projects")
    Select(drv.find_element(By.ID, "s-project")).select_by_visible_text("testproj")
    wait_for(lambda: len(Select(drv.find_element(By.ID, "s-spider")).options) > 1, 10, "spiders")
    Select(drv.find_element(By.ID, "s-spider")).select_by_visible_text("quick")
    drv.find_element(By.ID, "s-cron").send_keys("99 * * * *")
    drv.find_element(By.ID, "s-save").click()
    err = wait_text(drv, "#schedule-error", "out of range")
    assert "SPD_EBADPARAM" in err.text and "minute: 99" in err.text
    assert "/schedules/new" in drv.current_url  # stayed on the form
    # the same error while typing, where the daemon previews
    wait_for(lambda: any(t in drv.find_element(By.CSS_SELECTOR, ".preview").text
                         for t in ("minute: 99", "cannot preview")), 10, "the preview's verdict")


def test_running_job_log_grows(console, browser):
    d, drv = console, browser
    j = run_job(d, "slow", DEBUG, seconds=25)
    wait_state(d, j["id"], {"running"})
    open_page(drv, d, f"/jobs/{j['id']}")
    log = wait_text(drv, "#job-log", "Spider opened", seconds=30)
    first = len(log.text)
    wait_for(lambda: len(drv.find_element(By.ID, "job-log").text) > first + 200, 20, "the log to grow on screen")
    # the search box highlights matches
    drv.find_element(By.ID, "log-search").send_keys("tick")
    wait_for(lambda: len(drv.find_elements(By.CSS_SELECTOR, "#job-log mark")) > 1, 10, "highlighted matches")
    assert "match" in drv.find_element(By.ID, "log-hits").text
    no_errors(drv, "job log")
    api(d, "POST", f"/jobs/{j['id']}/cancel", json={"signal": "KILL"})


def test_cancel_from_console(console, browser):
    d, drv = console, browser
    j = run_job(d, "slow", DEBUG, seconds=60)
    wait_state(d, j["id"], {"running"})
    d.wait_log("testproj", "slow", j["job"], "Crawled (200)", 30)
    open_page(drv, d, f"/jobs/{j['id']}")
    wait_text(drv, "h1", "running")
    btn = [b for b in drv.find_elements(By.CSS_SELECTOR, ".toolbar button") if b.text == "Cancel"]
    assert btn, "no Cancel button on a running job"
    btn[0].click()
    ended = wait_state(d, j["id"], {"cancelled", "finished"}, 30)
    assert ended["state"] in ("cancelled", "finished") and ended["ended_ms"]
    wait_text(drv, "h1", ended["state"], seconds=15)
    no_errors(drv, "cancel")


def test_upload_egg_lists_spiders(console, browser, egg):
    d, drv = console, browser
    project = unique("up")
    open_page(drv, d, "/projects")
    wait_css(drv, "#upload-form")
    drv.find_element(By.ID, "up-project").send_keys(project)
    v = drv.find_element(By.ID, "up-version")
    v.send_keys(Keys.CONTROL, "a")
    v.send_keys("2.0")
    drv.find_element(By.ID, "up-egg").send_keys(egg("testproj_v2"))
    drv.find_element(By.CSS_SELECTOR, "#upload-form button[type=submit]").click()
    wait_text(drv, "h1", f"Project {project}")
    listed = wait_text(drv, "#spider-list", "slow")
    spiders = [li.get_attribute("data-spider") for li in listed.find_elements(By.CSS_SELECTOR, "li")]
    api_spiders = api(d, "GET", f"/projects/{project}/spiders")["spiders"]
    assert spiders == api_spiders and "quick" in spiders
    versions = api(d, "GET", f"/projects/{project}/versions")["versions"]
    assert versions and versions[-1] in drv.find_element(By.ID, "version-list").text
    no_errors(drv, "upload")


def test_basic_auth(spiderd, browser, egg):
    """Behind basic auth the console's own requests carry the browser's credentials."""
    from conftest import console_url
    d = spiderd(scrapyd={"username": "ops", "password": "s3cret"})
    d.upload("testproj", "1", egg("testproj"))
    done = run_job(d, "quick", count=2)
    wait_state(d, done["id"], {"finished"})
    assert d.session.get(d.url + API + "/status", timeout=5).status_code == 401
    drv = browser
    browser_errors(drv)
    base = console_url(d, [])
    host = base.split("//", 1)[1]
    drv.get(f"http://ops:s3cret@{host}/ui/jobs")
    wait_text(drv, "table.jobs", f"#{done['id']}")
    wait_text(drv, ".live", "live")
    no_errors(drv, "basic auth")


def test_events_arrive_live(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/events?type=schedule.")
    wait_css(drv, "#events-table")
    wait_text(drv, ".live", "live")
    name = unique("live")
    api(d, "POST", "/schedules", json={"name": name, "project": "testproj", "spider": "quick",
                                       "cron": "0 0 1 1 *"})
    row = wait_text(drv, "#events-table tbody tr:first-child", name, seconds=10)
    assert "schedule.created" in row.text
    assert Select(drv.find_element(By.ID, "event-type")).first_selected_option.get_attribute("value") == "schedule."
    no_errors(drv, "events")


def test_events_newest_first_and_older_pages(console, browser, data):
    """The feed opens on the newest events and pages back with "Older"."""
    d, drv = console, browser
    prefix = unique("older")
    for i in range(205):  # more than a page (200)
        api(d, "POST", "/schedules", json={"name": f"{prefix}{i}", "project": "testproj",
                                           "spider": "quick", "cron": "0 0 1 1 *"})
    open_page(drv, d, "/events?type=schedule.created")
    first = wait_text(drv, "#events-table tbody tr:first-child", f"{prefix}204")
    assert f"{prefix}203" in drv.find_element(By.CSS_SELECTOR,
                                              "#events-table tbody tr:nth-child(2)").text
    rows = drv.find_elements(By.CSS_SELECTOR, "#events-table tbody tr")
    assert len(rows) == 200 and first.get_attribute("data-event")
    ids = [int(r.get_attribute("data-event")) for r in rows]
    assert ids == sorted(ids, reverse=True)
    drv.find_element(By.CSS_SELECTOR, "nav.pager button").click()
    table = lambda: drv.find_elements(By.CSS_SELECTOR, "#events-table tbody tr")
    wait_for(lambda: len(table()) > 200, 10, "an older page below the first")
    more = table()
    ids = [int(r.get_attribute("data-event")) for r in more]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    names = {r.text.rsplit(" ", 1)[-1] for r in more}
    assert {f"{prefix}{i}" for i in range(205)} <= names
    no_errors(drv, "events paging")


def test_jobs_cursor_pages_and_url_filters(console, browser, data):
    d, drv = console, browser
    for _ in range(3):
        run_job(d, "quick", count=1)
    listed = api(d, "GET", "/jobs", params={"project": "testproj", "limit": 1000})["jobs"]
    open_page(drv, d, "/jobs?project=testproj&limit=2")
    wait_css(drv, "table.jobs tbody tr")
    ids = lambda: [int(r.get_attribute("data-job")) for r in drv.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")]  # noqa: E731
    first = ids()
    assert first == [j["id"] for j in listed[:2]]
    assert Select(drv.find_element(By.ID, "f-project")).first_selected_option.text == "testproj"
    drv.find_element(By.ID, "older").click()
    wait_for(lambda: "cursor=" in drv.current_url and ids() and ids() != first, 10, "the next page")
    assert ids() == [j["id"] for j in listed[2:4]]
    # the URL is the view: opening it again shows the same page
    url = drv.current_url
    drv.get(url)
    wait_for(lambda: ids() == [j["id"] for j in listed[2:4]], 10, "the same page from its URL")
    no_errors(drv, "jobs pages")


def test_log_is_text_not_markup(console, browser):
    """A log's HTML stays text and its ANSI colours become classes."""
    d, drv = console, browser
    j = run_job(d, "quick", count=1)
    wait_state(d, j["id"], {"finished"})
    # what a crawl may print: markup, and colours from a coloured log formatter
    with open(d.log_path("testproj", "quick", j["job"]), "a", encoding="utf-8") as f:
        f.write("<b id=injected>bold</b> \x1b[1;31mred-ua\x1b[0m plain\n")
    open_page(drv, d, f"/jobs/{j['id']}")
    log = wait_text(drv, "#job-log", "red-ua")
    assert "<b id=injected>bold</b>" in log.text
    assert not drv.find_elements(By.ID, "injected")
    assert "\x1b" not in log.text
    red = drv.find_elements(By.CSS_SELECTOR, "#job-log .a-f31")
    assert any("red-ua" in r.text for r in red), [r.text for r in red]
    no_errors(drv, "log escaping")


def test_rerun_from_console(console, browser, data):
    d, drv = console, browser
    src = data["done"]
    open_page(drv, d, f"/jobs/{src['id']}")
    wait_text(drv, "h1", "finished")
    [b for b in drv.find_elements(By.CSS_SELECTOR, ".toolbar button") if b.text == "Re-run"][0].click()
    wait_for(lambda: f"/ui/jobs/{src['id']}" not in drv.current_url, 10, "the new job's page")
    new_id = int(drv.current_url.rstrip("/").split("/")[-1])
    new = api(d, "GET", f"/jobs/{new_id}")
    assert new_id != src["id"] and (new["project"], new["spider"], new["args"]) == (src["project"], src["spider"], src["args"])
    wait_text(drv, "h1", f"Job #{new_id}")
    no_errors(drv, "re-run")


def test_queue_keys_and_dead_letters(console, browser, data):
    d, drv = console, browser
    q = data["queue"]
    open_page(drv, d, f"/queues/{q}")
    wait_text(drv, "#items-dead", "http://a.example/1")
    routes = {(r["method"], r["path"]) for r in api(d, "GET", "/")["routes"]}
    if ("GET", "/api/v1/queues/{name}/keys") in routes:
        keys = wait_text(drv, "#keys-table", "b.example")  # a.example holds only a dead letter
        assert "a.example" not in keys.text
    else:
        wait_text(drv, "main", "does not list per-key state")
    [b for b in drv.find_elements(By.CSS_SELECTOR, ".toolbar button") if b.text == "Requeue all dead"][0].click()
    wait_for(lambda: not api(d, "GET", f"/queues/{q}/items", params={"state": "dead"})["items"], 10, "no dead letters")
    wait_text(drv, "#q-dead", "0")
    no_errors(drv, "queue")


def test_queue_counts_and_ack_rate(console, browser, data):
    """The queue list shows ready, delayed and leased as the API counts them,
    and an acks-per-minute rate once acks happen between two polls."""
    d, drv = console, browser
    q = unique("rates")
    api(d, "POST", f"/queues/{q}/put", json={"elements": [f"http://r.example/{i}" for i in range(30)]})
    api(d, "POST", f"/queues/{q}/put", json={"elements": ["http://later.example/1"], "delay": 3600})
    took = api(d, "POST", f"/queues/{q}/take", json={"max": 10})
    open_page(drv, d, "/queues")
    wait_css(drv, f"#queues-table tr[data-queue='{q}']")  # the table is drawn: its heads too
    heads = [th.text for th in drv.find_elements(By.CSS_SELECTOR, "#queues-table thead th")]
    cell = lambda name: wait_css(drv, f"#queues-table tr[data-queue='{q}']").find_elements(
        By.TAG_NAME, "td")[heads.index(name)].text
    assert (cell("ready"), cell("delayed"), cell("leased")) == ("20", "1", "10")
    assert cell("acks/min") == "—"
    time.sleep(1.2)  # the next poll is over a second after the first
    api(d, "POST", f"/queues/{q}/ack", json={"leases": [i["lease"] for i in took["items"]]})
    wait_for(lambda: cell("acks/min") not in ("—", "0"), 15, "an acks/min rate")
    assert int(cell("acks/min").replace(",", "")) > 0
    assert cell("leased") == "0"
    no_errors(drv, "queue rates")


def test_run_now_with_arguments(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/projects/testproj")
    li = wait_css(drv, "#spider-list li[data-spider=quick]")
    li.find_element(By.TAG_NAME, "button").click()
    form = wait_css(drv, ".run-form")
    form.find_element(By.NAME, "args").send_keys("count=2\nlabel=from the console")
    form.find_element(By.NAME, "settings").send_keys("LOG_LEVEL=INFO")
    form.find_element(By.NAME, "priority").send_keys("5")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: "/ui/jobs/" in drv.current_url, 10, "the new job's page")
    new_id = int(drv.current_url.rstrip("/").split("/")[-1])
    j = api(d, "GET", f"/jobs/{new_id}")
    assert j["args"] == {"count": "2", "label": "from the console"}
    assert j["settings"] == {"LOG_LEVEL": "INFO"} and j["priority"] == 5
    wait_text(drv, "main", "from the console")
    wait_state(d, new_id, {"finished"})
    wait_text(drv, "#items-table", "quick1", seconds=20)  # the page follows the job to its end
    no_errors(drv, "run now")


def test_schedule_edit_and_pause(console, browser, data):
    d, drv = console, browser
    s = api(d, "POST", "/schedules", json={"name": unique("edit"), "project": "testproj", "spider": "quick",
                                           "cron": "0 6 * * *", "tz": "UTC"})
    open_page(drv, d, f"/schedules/{s['id']}/edit")
    cron = wait_css(drv, "#s-cron")
    wait_for(lambda: cron.get_attribute("value") == "0 6 * * *", 10, "the form filled in")
    cron.send_keys(Keys.CONTROL, "a")
    cron.send_keys("*/20 * * * *")
    wait_text(drv, "#cron-words", "Every 20 minutes")
    drv.find_element(By.ID, "s-save").click()
    wait_text(drv, "h1", f"Schedule {s['name']}")
    wait_for(lambda: api(d, "GET", f"/schedules/{s['id']}")["cron"] == "*/20 * * * *", 10, "the new cron")
    [b for b in drv.find_elements(By.CSS_SELECTOR, ".toolbar button") if b.text == "Pause"][0].click()
    # The pause asks why; the note goes with it.
    prompt = wait_for(lambda: _alert(drv), 10, "the pause's question")
    assert "why?" in prompt.text
    prompt.send_keys("site redesign")
    prompt.accept()
    wait_text(drv, "h1", "paused")
    got = api(d, "GET", f"/schedules/{s['id']}")
    assert got["paused"] is True and got["pause_note"]["why"] == "site redesign", got
    no_errors(drv, "schedule edit")


def _alert(drv):
    try:
        return drv.switch_to.alert
    except Exception:
        return None


def test_jobs_text_search(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/jobs")
    wait_css(drv, "table.jobs tbody tr")
    box = drv.find_element(By.ID, "job-search")
    box.send_keys("crash")
    wait_for(lambda: "q=crash" in drv.current_url, 10, "the search in the URL")

    def only_crash():
        rows = drv.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
        return rows and all("crash" in r.text for r in rows) and \
            len(rows) == len(api(d, "GET", "/jobs", params={"q": "crash"})["jobs"])
    wait_for(only_crash, 10, "only the crash jobs listed")
    assert f"#{data['crash']['id']}" in drv.find_element(By.CSS_SELECTOR, "table.jobs").text
    no_errors(drv, "job search")


def test_time_range_and_api_errors_in_place(console, browser, data):
    d, drv = console, browser
    open_page(drv, d, "/jobs?from=2099-01-01T00:00:00.000Z")
    wait_text(drv, "main", "No jobs match these filters.")
    open_page(drv, d, "/jobs?to=2000-01-01T00:00:00.000Z&project=testproj")
    wait_text(drv, "main", "No jobs match these filters.")
    # a filter the API refuses: its code and message, in the page
    browser_errors(drv)
    drv.get(d.console + "/ui/jobs?spider=..%2Fbad")
    err = wait_text(drv, ".error", "SPD_EBADPARAM")
    assert "spider" in err.text
    open_page(drv, d, "/jobs/999999")
    wait_text(drv, ".error", "SPD_ENOJOB")


def test_api_reference_tries_requests_on_this_daemon(console, browser):
    d, drv = console, browser
    browser_errors(drv)
    drv.get(d.console + "/api/")
    path = wait_css(drv, ".opblock-summary-path[data-path='/api/v1/status']", seconds=20)
    path.click()
    execute = wait_css(drv, ".opblock.is-open button.execute")  # "try it out" is on already
    execute.click()
    body = wait_text(drv, ".opblock.is-open .live-responses-table", "node_name")
    assert "testnode" in body.text
    url = drv.find_element(By.CSS_SELECTOR, ".opblock.is-open .request-url").text
    assert (d.console + "/api/v1/status") in url, url
    no_errors(drv, "API reference")
