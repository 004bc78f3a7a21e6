"""The console's job page in headless Chromium against a real daemon: a job's
meta as a key/value table, and a test run flagged as one there and in the
job lists; a job without meta says so, a real run says it is no test run."""

import json

from selenium.webdriver.common.by import By

from conftest import browser_errors, set_theme, wait_for, wait_text

API = "/api/v1"


def api(d, method, path, **kw):
    r = d.request(method, API + path, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def ended(d, job_id):
    return wait_for(lambda: (lambda j: j if j["state"] not in ("pending", "running") else None)(
        api(d, "GET", f"/jobs/{job_id}")), 60, f"job {job_id} to end", interval=0.2)


def open_page(drv, d, path):
    browser_errors(drv)
    drv.get(d.console + "/ui" + path)


def no_errors(drv, what):
    errs = browser_errors(drv)
    assert not errs, f"browser errors on {what}: " + json.dumps(errs, indent=1)


def meta_rows(drv):
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in drv.find_elements(By.CSS_SELECTOR, "#job-meta tbody tr")]


def test_job_page_shows_meta_and_the_test_flag(console, browser, shot):
    d, drv = console, browser
    t = api(d, "POST", "/jobs/test", json={
        "project": "testproj", "spider": "quick", "args": {"count": "3"}, "items": 1,
        "meta": {"customer": "acme", "batch": 7, "tags": ["a", "b"]}})
    plain = api(d, "POST", "/jobs", json={"project": "testproj", "spider": "quick",
                                          "args": {"count": "1"}})
    ended(d, t["id"])
    ended(d, plain["id"])
    for theme in ("light", "dark"):
        open_page(drv, d, f"/jobs/{t['id']}")
        set_theme(drv, theme)
        wait_text(drv, "#job-meta", "customer")
        assert meta_rows(drv) == [["customer", "acme"], ["batch", "7"], ["tags", '["a","b"]']]
        assert drv.find_element(By.ID, "job-test").text == "test run"
        assert drv.find_element(By.ID, "job-test-flag").text.startswith("yes")
        no_errors(drv, f"test run page ({theme})")
        shot(drv, f"job-meta-test-{theme}")
    open_page(drv, d, f"/jobs/{plain['id']}")
    wait_text(drv, "#job-test-flag", "no")
    assert drv.find_element(By.ID, "job-meta-empty").text == "No meta."
    assert not drv.find_elements(By.ID, "job-test")
    # The list marks the test run and only it.
    open_page(drv, d, "/jobs")
    wait_text(drv, f"tr[data-job='{t['id']}']", "test")
    assert not drv.find_elements(By.CSS_SELECTOR, f"tr[data-job='{plain['id']}'] .test-run")
    # A patch of the meta shows once the page reloads it.
    api(d, "PATCH", f"/jobs/{t['id']}/meta", json={"meta": {"batch": None, "note": "checked"}})
    open_page(drv, d, f"/jobs/{t['id']}")
    wait_text(drv, "#job-meta", "note")
    assert meta_rows(drv) == [["customer", "acme"], ["tags", '["a","b"]'], ["note", "checked"]]
    no_errors(drv, "job pages")
