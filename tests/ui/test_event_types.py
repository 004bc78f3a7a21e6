"""The Events page offers every event type the daemon records, and no other:
its list is built from the daemon's own (src/core/event.h), which the served
OpenAPI document lists as the Event schema's type enum."""

from selenium.webdriver.common.by import By

from conftest import browser_errors, wait_css


def test_event_filter_offers_every_type_and_each_family(console, browser):
    d, drv = console, browser
    doc = d.get("/api/v1/openapi.json").json()
    listed = doc["components"]["schemas"]["Event"]["properties"]["type"]["enum"]
    browser_errors(drv)
    drv.get(d.console + "/ui/events")
    # Preact sets an option's value as a property: no attribute when the text is the same
    wait_css(drv, "#event-type option[title]")
    opts = drv.find_elements(By.CSS_SELECTOR, "#event-type option")
    values = [o.get_property("value") for o in opts]
    assert values[0] == ""  # all
    assert [v for v in values[1:] if not v.endswith(".")] == listed
    families = [v for v in values if v.endswith(".")]
    assert families == list(dict.fromkeys(t.split(".")[0] + "." for t in listed))
    # each family's prefix comes just before its first type, with a meaning to hover
    for fam in families:
        i = values.index(fam)
        assert values[i + 1].startswith(fam)
    titles = {o.get_property("value"): o.get_attribute("title") for o in opts[1:]}
    assert all(titles.values())
    assert "last admin" in titles["user.delete_refused"]
    assert not browser_errors(drv)
