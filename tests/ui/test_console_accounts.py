"""The console's accounts page, in a real browser against a real daemon:
an admin makes an account, puts a project in it, sees its upcoming runs
and its cap, and the projects list names each project's account."""

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import browser_errors, unique, wait_css, wait_for, wait_text

API = "/api/v1"


def api(d, method, path, **kw):
    r = d.request(method, API + path, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def open_page(drv, d, path):
    browser_errors(drv)
    drv.get(d.console + "/ui" + path)


def test_an_admin_makes_an_account_and_puts_a_project_in_it(console, browser, shot):
    d, drv = console, browser
    name, sched = unique("acct"), unique("s")
    api(d, "POST", "/schedules", json={"name": sched, "project": "testproj", "spider": "quick",
                                       "cron": "0 3 * * *"})
    open_page(drv, d, "/accounts")
    wait_css(drv, "#account-form")
    drv.find_element(By.ID, "acct-name").send_keys(name)
    drv.find_element(By.ID, "acct-desc").send_keys("a customer")
    drv.find_element(By.ID, "acct-cap").send_keys("2")
    drv.find_element(By.CSS_SELECTOR, "#account-form button[type=submit]").click()
    box = f"[data-account='{name}']"
    wait_text(drv, box, "cap 2")
    form = drv.find_element(By.CSS_SELECTOR, f"{box} form")
    Select(form.find_element(By.TAG_NAME, "select")).select_by_visible_text("project")
    form.find_element(By.TAG_NAME, "input").send_keys("testproj")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_text(drv, box, sched)  # its upcoming runs: the project's schedule
    got = api(d, "GET", f"/accounts/{name}")
    assert got["projects"] == ["testproj"] and got["max_running"] == 2
    assert got["description"] == "a customer"
    shot(drv, "accounts")
    assert not browser_errors(drv)
    open_page(drv, d, "/projects")
    wait_text(drv, "#projects-table", name)
    # taken out again: the page shows it, the daemon has it
    open_page(drv, d, "/accounts")
    wait_css(drv, f"{box} button[title='take project testproj out of {name}']").click()
    wait_for(lambda: api(d, "GET", f"/accounts/{name}")["projects"] == [], 10, "unassigned")
    api(d, "DELETE", f"/accounts/{name}")
    api(d, "DELETE", f"/schedules/{sched}")
