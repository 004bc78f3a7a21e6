"""The console's calendars page and a schedule's backfill form in headless
Chromium against a real daemon: a calendar made on the page is one the
schedule form offers and the API holds; a backfill's dry run lists its
slots, then starting it shows the backfill, which can be paused and
cancelled from the page."""

from selenium.webdriver.common.by import By

from conftest import browser_errors, unique, wait_css, wait_for, wait_text

API = "/api/v1"


def api(d, method, path, **kw):
    r = d.request(method, API + path, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def open_page(drv, d, path):
    browser_errors(drv)
    drv.get(d.console + "/ui" + path)


def test_calendar_page_and_schedule_backfill(console, browser):
    d, drv = console, browser
    name = unique("hol")
    open_page(drv, d, "/calendars")
    wait_css(drv, "#c-name").send_keys(name)
    drv.find_element(By.ID, "c-dates").send_keys("2030-12-25\n2030-12-26")
    drv.find_element(By.CSS_SELECTOR, "#calendar-form input[data-day='sun']").click()
    drv.find_element(By.ID, "c-hours").send_keys("01:00-03:00")
    drv.find_element(By.ID, "c-create").click()
    wait_text(drv, "#calendars-table", name)
    c = api(d, "GET", f"/calendars/{name}")
    assert c["dates"] == ["2030-12-25", "2030-12-26"] and c["weekdays"] == ["sun"]
    assert c["hours"] == ["01:00-03:00"]

    s = api(d, "POST", "/schedules", json={"name": unique("bf"), "project": "testproj",
                                           "spider": "slow", "cron": "0 6 * * *", "tz": "UTC",
                                           "args": {"seconds": "60"}})
    open_page(drv, d, f"/schedules/{s['id']}/edit")
    box = wait_css(drv, f"#s-calendars input[data-calendar='{name}']")
    box.click()
    drv.find_element(By.ID, "s-save").click()
    wait_text(drv, "#s-cals", name)
    assert api(d, "GET", f"/schedules/{s['id']}")["calendars"] == [name]

    # A dry run over the last seven days (the form's window) lists seven slots.
    wait_css(drv, "#b-max").clear()
    drv.find_element(By.ID, "b-max").send_keys("1")
    drv.find_element(By.ID, "b-preview").click()
    wait_text(drv, "#backfill-plan", "7 slots to run")
    n = len(drv.find_elements(By.CSS_SELECTOR, "#backfill-slots li"))
    assert n == 7, n
    drv.find_element(By.ID, "b-start").click()
    wait_text(drv, "#backfill-plan", "Started backfill")
    row = wait_css(drv, "#backfills-table tr[data-backfill]")
    bid = int(row.get_attribute("data-backfill"))
    assert api(d, "GET", f"/backfills/{bid}")["slots"] == n
    [b for b in row.find_elements(By.CSS_SELECTOR, "button") if b.text == "Pause"][0].click()
    wait_for(lambda: api(d, "GET", f"/backfills/{bid}")["paused"], 10, "the backfill paused")
    drv.execute_script("window.confirm = () => true")
    wait_text(drv, f"#backfills-table tr[data-backfill='{bid}']", "Resume", seconds=20)
    row = drv.find_element(By.CSS_SELECTOR, f"#backfills-table tr[data-backfill='{bid}']")
    [b for b in row.find_elements(By.CSS_SELECTOR, "button") if b.text == "Cancel"][0].click()
    wait_for(lambda: api(d, "GET", f"/backfills/{bid}")["state"] == "cancelled", 20,
             "the backfill cancelled")
    errs = [e for e in browser_errors(drv) if "favicon" not in str(e)]
    assert not errs, errs
