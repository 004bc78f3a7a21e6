"""Sneakpeek 0.2's JSON-RPC API at /api/v1/jsonrpc, as a Sneakpeek client
sees it: every answer is parsed by pydantic models written after
Sneakpeek's own (scraper/model.py, queue/model.py, scheduler/model.py,
session_loggers/base.py), against a real daemon running a real Scrapy
project; plus Sneakpeek's error codes, a scraper's state handed from one
real crawl to the next, the refusal of a second concurrent task, and the
CORS preflight of Sneakpeek's web UI (another origin)."""

import json
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel, parse_obj_as

from conftest import req, wait_for

API = "/api/v1"
PROJECT = "sp"  # testproj plus the stateful spider (projects/sneakproj)
UI_ORIGIN = "http://localhost:8080"


# ---- Sneakpeek's models ----------------------------------------------------

class TaskSchedule(str, Enum):
    INACTIVE = "inactive"
    EVERY_SECOND = "every_second"
    EVERY_MINUTE = "every_minute"
    EVERY_HOUR = "every_hour"
    EVERY_DAY = "every_day"
    EVERY_WEEK = "every_week"
    EVERY_MONTH = "every_month"
    CRONTAB = "crontab"


class TaskPriority(Enum):
    UTMOST = 0
    HIGH = 1
    NORMAL = 2


class TaskStatus(str, Enum):
    PENDING = "pending"
    STARTED = "started"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    KILLED = "killed"


class ScraperConfig(BaseModel):
    params: dict[str, Any] | None = None
    middleware_config: dict[str, Any] | None = None


class Scraper(BaseModel):
    id: str
    name: str
    handler: str
    schedule: TaskSchedule
    schedule_crontab: str | None
    config: ScraperConfig
    priority: TaskPriority = TaskPriority.NORMAL
    state: str | None = None
    timeout: timedelta | None = None


class CreateScraperRequest(BaseModel):
    name: str
    handler: str
    schedule: TaskSchedule
    schedule_crontab: str | None
    config: ScraperConfig
    priority: TaskPriority = TaskPriority.NORMAL
    timeout_seconds: int | None = None


class Task(BaseModel):
    id: int
    task_name: str
    task_handler: str
    status: TaskStatus
    priority: TaskPriority
    created_at: datetime
    started_at: datetime | None = None
    last_active_at: datetime | None = None
    finished_at: datetime | None = None
    payload: str | None = None
    result: str | None = None
    timeout: timedelta | None = None


class EphemeralScraperTask(BaseModel):
    scraper_handler: str
    scraper_config: ScraperConfig
    scraper_state: str | None = None


class LogLine(BaseModel):
    id: str
    data: dict[str, Any]


class Priority(BaseModel):
    name: str
    value: int


def parse(model, value):
    return parse_obj_as(model, value)


def dump(m):
    """A model as its JSON sends it (pydantic 1, as Sneakpeek 0.2 uses)."""
    return json.loads(m.json())


# ---- a client --------------------------------------------------------------

_ids = iter(range(1, 1 << 30))


def call(d, method, headers=None, **params):
    """The JSON-RPC answer of one call: ("result", value) or ("error", obj)."""
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    r = req(d, "POST", "/jsonrpc", data=json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["jsonrpc"] == "2.0" and doc["id"] == body["id"], doc
    return ("error", doc["error"]) if "error" in doc else ("result", doc["result"])


def result(d, method, model=None, **params):
    kind, value = call(d, method, **params)
    assert kind == "result", (method, value)
    return parse(model, value) if model is not None else value


def error(d, method, **params):
    kind, value = call(d, method, **params)
    assert kind == "error", (method, value)
    assert isinstance(value["code"], int) and value["message"], value
    return value


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    daemon = module_spiderd(name="sneakpeek")
    r = daemon.request("POST", f"{API}/projects/{PROJECT}/versions", params={"version": "1.0"},
                       data=egg_bytes("sneakproj"),
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return daemon


def create(d, name, handler=f"{PROJECT}/quick", schedule=TaskSchedule.INACTIVE, **kw):
    request = CreateScraperRequest(name=name, handler=handler, schedule=schedule,
                                   schedule_crontab=kw.pop("schedule_crontab", None),
                                   config=kw.pop("config", ScraperConfig()), **kw)
    return result(d, "create_scraper", Scraper, scraper=dump(request))


def wait_task(d, task_id, statuses=(TaskStatus.SUCCEEDED, TaskStatus.FAILED,
                                     TaskStatus.KILLED, TaskStatus.DEAD), seconds=90):
    def check():
        t = result(d, "get_task_instance", Task, task_id=task_id)
        return t if t.status in statuses else None
    return wait_for(check, seconds, f"task {task_id} in {statuses}", interval=0.2)


def all_log_lines(d, task_id, max_lines=100):
    lines, last = [], None
    while True:
        page = result(d, "get_task_logs", list[LogLine], task_id=task_id,
                      last_log_line_id=last, max_lines=max_lines)
        if not page:
            return lines
        assert len(page) <= max_lines
        lines += page
        last = page[-1].id


# ---- the constants ---------------------------------------------------------

def test_constants_parse(d):
    schedules = result(d, "get_schedules", list[TaskSchedule])
    assert schedules == list(TaskSchedule)
    priorities = result(d, "get_priorities", list[Priority])
    assert [(p.name, p.value) for p in priorities] == [(p.name, p.value) for p in TaskPriority]
    assert result(d, "is_read_only", bool) is False
    handlers = result(d, "get_scraper_handlers", list[str])
    assert {f"{PROJECT}/quick", f"{PROJECT}/stateful"} <= set(handlers)


# ---- scrapers --------------------------------------------------------------

def test_scraper_create_get_update_delete(d):
    s = create(d, "sp-crud", schedule=TaskSchedule.EVERY_HOUR, priority=TaskPriority.HIGH,
               config=ScraperConfig(params={"count": "2"}, middleware_config={"proxy": {}}),
               timeout_seconds=600)
    assert s.id.isdigit() and s.name == "sp-crud" and s.handler == f"{PROJECT}/quick"
    assert s.schedule == TaskSchedule.EVERY_HOUR and s.schedule_crontab is None
    assert s.config.params == {"count": "2"} and s.priority == TaskPriority.HIGH
    assert s.timeout == timedelta(seconds=600) and s.state is None
    assert result(d, "get_scraper", Scraper, id=s.id) == s
    assert s in result(d, "get_scrapers", list[Scraper])

    # A scraper is a schedule: the native face sees it, skipping overlaps.
    native = result(d, "schedules.get", schedule=s.id)
    assert native["interval"] == 3600 and native["overlap"] == "skip"
    assert native["priority"] == 1 and native["args"] == {"count": "2"}

    changed = s.copy(update={"schedule": TaskSchedule.CRONTAB,
                                   "schedule_crontab": "*/5 * * * *",
                                   "priority": TaskPriority.UTMOST, "state": "s0",
                                   "timeout": timedelta(seconds=90)})
    u = result(d, "update_scraper", Scraper, scraper=dump(changed))
    assert u == changed
    assert result(d, "get_scraper", Scraper, id=s.id) == changed
    for schedule in (TaskSchedule.EVERY_MONTH, TaskSchedule.EVERY_SECOND, TaskSchedule.INACTIVE):
        u = result(d, "update_scraper", Scraper, scraper=dump(changed.copy(update={
            "schedule": schedule, "schedule_crontab": None})))
        assert u.schedule == schedule and u.state == "s0"
    assert result(d, "schedules.get", schedule=s.id)["paused"] is True

    gone = result(d, "delete_scraper", Scraper, id=s.id)
    assert gone.id == s.id and gone.schedule == TaskSchedule.INACTIVE
    assert error(d, "get_scraper", id=s.id)["code"] == 5000
    assert s.id not in [x.id for x in result(d, "get_scrapers", list[Scraper])]


def test_sneakpeek_error_codes(d):
    assert error(d, "get_scraper", id="no-such-scraper")["code"] == 5000
    assert error(d, "get_scraper", id="987654321")["code"] == 5000
    assert error(d, "delete_scraper", id="987654321")["code"] == 5000
    assert error(d, "enqueue_scraper", scraper_id="987654321",
                 priority=TaskPriority.NORMAL.value)["code"] == 5000
    assert error(d, "get_task_instances", task_name="987654321")["code"] == 5000
    assert error(d, "get_task_instance", task_id=987654321)["code"] == 5001
    assert error(d, "get_task_logs", task_id=987654321)["code"] == 5001
    missing = Scraper(id="987654321", name="ghost", handler=f"{PROJECT}/quick",
                      schedule=TaskSchedule.INACTIVE, schedule_crontab=None,
                      config=ScraperConfig())
    assert error(d, "update_scraper", scraper=dump(missing))["code"] == 5000
    for handler in (f"{PROJECT}/nope", "nope/quick", "no-slash"):
        request = CreateScraperRequest(name="bad-handler", handler=handler,
                                       schedule=TaskSchedule.INACTIVE, schedule_crontab=None,
                                       config=ScraperConfig())
        e = error(d, "create_scraper", scraper=dump(request))
        assert e["code"] == 10004, e
        e = error(d, "run_ephemeral", task={"scraper_handler": handler,
                                             "scraper_config": {"params": None}})
        assert e["code"] == 10004, e
    # Bad input is JSON-RPC's invalid params, with the field named.
    e = error(d, "create_scraper", scraper={"name": "x", "handler": f"{PROJECT}/quick",
                                            "schedule": "hourly", "config": {}})
    assert e["code"] == -32602 and e["data"]["details"]["field"] == "schedule"
    e = error(d, "create_scraper", scraper={"name": "x", "handler": f"{PROJECT}/quick",
                                            "schedule": "crontab", "config": {}})
    assert e["code"] == -32602 and e["data"]["details"]["field"] == "schedule_crontab"
    e = error(d, "get_scraper", idd="1")
    assert e["code"] == -32602
    # The crawl's own method is the crawl's: not a user's.
    assert error(d, "set_scraper_state", state="x")["data"]["code"] == "SPD_EFORBIDDEN"


# ---- tasks: state between runs, one at a time ------------------------------

def test_state_round_trip_through_real_crawls(d):
    s = create(d, "sp-state", handler=f"{PROJECT}/stateful",
               config=ScraperConfig(params={"mark": "m1"}))
    t1 = result(d, "enqueue_scraper", Task, scraper_id=s.id, priority=TaskPriority.HIGH.value)
    assert t1.task_name == s.id and t1.task_handler == "scraper"
    assert t1.status == TaskStatus.PENDING and t1.priority == TaskPriority.HIGH
    # Sneakpeek never runs one scraper twice at once.
    e = error(d, "enqueue_scraper", scraper_id=s.id, priority=TaskPriority.NORMAL.value)
    assert e["code"] == 10000 and e["data"]["details"]["task_id"] == t1.id
    t1 = wait_task(d, t1.id)
    assert t1.status == TaskStatus.SUCCEEDED, t1
    assert t1.started_at and t1.finished_at and t1.last_active_at and t1.result
    after1 = result(d, "get_scraper", Scraper, id=s.id)
    assert json.loads(after1.state) == {"runs": 1, "mark": "m1"}
    lines = all_log_lines(d, t1.id)
    text = "\n".join(line.data["message"] for line in lines)
    assert "STATE-IN None" in text and '"scraper_id": "%s"' % s.id in text

    # The next run starts from it, and hands on the next one.
    t2 = result(d, "enqueue_scraper", Task, scraper_id=s.id, priority=TaskPriority.NORMAL.value)
    t2 = wait_task(d, t2.id)
    assert t2.status == TaskStatus.SUCCEEDED, t2
    text = "\n".join(line.data["message"] for line in all_log_lines(d, t2.id, max_lines=7))
    assert 'STATE-IN {"runs": 1, "mark": "m1"}' in text
    assert json.loads(result(d, "get_scraper", Scraper, id=s.id).state)["runs"] == 2

    # A user sets the state too (update_scraper); the next crawl starts there.
    seeded = after1.copy(update={"state": json.dumps({"runs": 40, "mark": "m1"})})
    result(d, "update_scraper", Scraper, scraper=dump(seeded))
    t3 = wait_task(d, result(d, "enqueue_scraper", Task, scraper_id=s.id,
                             priority=TaskPriority.UTMOST.value).id)
    assert t3.status == TaskStatus.SUCCEEDED and t3.priority == TaskPriority.UTMOST
    assert json.loads(result(d, "get_scraper", Scraper, id=s.id).state)["runs"] == 41

    tasks = result(d, "get_task_instances", list[Task], task_name=s.id)
    assert {t.id for t in tasks} == {t1.id, t2.id, t3.id}
    assert all(t.task_name == s.id and t.payload == "" for t in tasks)

    # Log lines page by id: after the last id read, nothing is read twice.
    first = result(d, "get_task_logs", list[LogLine], task_id=t1.id, max_lines=3)
    rest = result(d, "get_task_logs", list[LogLine], task_id=t1.id,
                  last_log_line_id=first[-1].id, max_lines=100000 // 10)
    assert [x.id for x in first + rest][:len(lines)] == [x.id for x in lines]
    assert error(d, "get_task_logs", task_id=t1.id, last_log_line_id="abc")["code"] == -32602


def test_run_ephemeral(d):
    task = EphemeralScraperTask(scraper_handler=f"{PROJECT}/stateful",
                                scraper_config=ScraperConfig(params={"mark": "eph"}),
                                scraper_state=json.dumps({"runs": 7, "mark": "eph"}))
    t = result(d, "run_ephemeral", Task, task=dump(task),
               priority=TaskPriority.NORMAL.value)
    assert t.task_handler == "ephemeral_scraper" and t.task_name == "ephemeral_scraper"
    assert EphemeralScraperTask.parse_raw(t.payload) == task
    t = wait_task(d, t.id)
    # No scraper keeps an ephemeral task's state: the crawl is told so.
    text = "\n".join(line.data["message"] for line in all_log_lines(d, t.id))
    assert 'STATE-IN {"runs": 7, "mark": "eph"}' in text and "not started by a scraper" in text
    ephemeral = result(d, "get_task_instances", list[Task], task_name="ephemeral_scraper")
    assert t.id in [x.id for x in ephemeral]
    assert all(x.task_handler == "ephemeral_scraper" for x in ephemeral)


def test_schedule_skips_while_a_task_is_active(d):
    s = create(d, "sp-skip", handler=f"{PROJECT}/slow", schedule=TaskSchedule.EVERY_SECOND,
               config=ScraperConfig(params={"seconds": "30"}))

    def skipped():
        runs = result(d, "schedules.runs", schedule=s.id, state=["skipped"])["runs"]
        return runs or None
    try:
        wait_for(skipped, 60, "a run skipped while the first task runs", interval=0.3)
        tasks = result(d, "get_task_instances", list[Task], task_name=s.id)
        active = [t for t in tasks if t.status in (TaskStatus.PENDING, TaskStatus.STARTED)]
        assert len(active) == 1, tasks
        assert error(d, "enqueue_scraper", scraper_id=s.id,
                     priority=TaskPriority.NORMAL.value)["code"] == 10000
    finally:
        result(d, "delete_scraper", Scraper, id=s.id)
    for job in result(d, "jobs.list", project=PROJECT, spider="slow",
                      state=["pending", "running"])["jobs"]:
        result(d, "jobs.cancel", id=job["id"])


# ---- the web UI's origin ---------------------------------------------------

def test_cors_preflight_and_answer_for_another_origin(d):
    r = req(d, "OPTIONS", "/jsonrpc", headers={
        "Origin": UI_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert r.status_code in (200, 204), r.text
    assert r.headers.get("Access-Control-Allow-Origin") in ("*", UI_ORIGIN)
    assert "POST" in r.headers.get("Access-Control-Allow-Methods", "")
    allowed = r.headers.get("Access-Control-Allow-Headers", "").lower()
    assert allowed == "*" or "content-type" in [h.strip() for h in allowed.split(",")], r.headers
    body = {"jsonrpc": "2.0", "id": 1, "method": "get_priorities", "params": {}}
    r = req(d, "POST", "/jsonrpc", data=json.dumps(body),
            headers={"Content-Type": "application/json", "Origin": UI_ORIGIN})
    assert r.status_code == 200
    assert r.headers.get("Access-Control-Allow-Origin") in ("*", UI_ORIGIN)
    parse(list[Priority], r.json()["result"])


# ---- with credentials required ---------------------------------------------

def test_job_token_sets_state_when_credentials_are_required(spiderd, egg_bytes):
    """The crawl's job token passes the daemon's authentication for
    set_scraper_state only; the state still reaches the next run."""
    d = spiderd(scrapyd={"username": "op", "password": "secret"})
    r = d.request("POST", f"{API}/projects/{PROJECT}/versions", params={"version": "1.0"},
                  data=egg_bytes("sneakproj"),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    s = create(d, "sp-auth", handler=f"{PROJECT}/stateful")
    for mark in ("first", "second"):
        t = wait_task(d, result(d, "enqueue_scraper", Task, scraper_id=s.id,
                                priority=TaskPriority.NORMAL.value).id)
        assert t.status == TaskStatus.SUCCEEDED, t
        text = "\n".join(line.data["message"] for line in all_log_lines(d, t.id))
        assert '"scraper_id": "%s"' % s.id in text, text[-2000:]
    assert json.loads(result(d, "get_scraper", Scraper, id=s.id).state)["runs"] == 2
    # Without credentials: refused by the server, as any other method.
    body = {"jsonrpc": "2.0", "id": 1, "method": "get_scrapers", "params": {}}
    r = d.request("POST", f"{API}/jsonrpc", json=body, auth=("op", "wrong"))
    assert r.status_code == 401
