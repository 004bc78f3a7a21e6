# The README's commands. Everything builds with CMake + Ninja; tests run under CTest.
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)

# Debian packages needed to build, run, test and benchmark spiderd.
DEB_PKGS := build-essential cmake ninja-build pkg-config python3-pydantic \
	libuv1-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev \
	libzip-dev libarchive-dev libicu-dev libcmocka-dev libpq-dev libhiredis-dev \
	libcurl4-openssl-dev libssl-dev libgnutls28-dev zlib1g-dev openssl \
	python3 python3-scrapy python3-pytest python3-requests python3-setuptools \
	wrk zip unzip curl redis-server postgresql python3-psycopg2 \
	chromium chromium-driver python3-selenium python3-jsonschema \
	debhelper dpkg-dev fakeroot lintian python3-yaml python3-prometheus-client \
	nginx-light python3-pytest-xdist awscli radosgw ceph-mon ceph-osd docker-compose \
	qemu-system-x86 busybox-static python3-venv python3-pip
# Only for `make fuzz` (building and testing replay the corpora without them).
FUZZ_PKGS := clang libclang-rt-14-dev
# Node.js only where there is none: a machine with NodeSource's nodejs (which
# includes npm) keeps it, and Debian's npm would conflict with that one.
DEB_PKGS += $(if $(shell command -v node 2>/dev/null),,nodejs) $(if $(shell command -v npm 2>/dev/null),,npm)

# The console, docs and API reference (ui/dist/, served at /ui/, /docs/, /api/).
UI_SRC := ui/build.mjs ui/package.json $(shell find ui/src -type f 2>/dev/null) $(wildcard docs/*.md) src/core/event.h
UI_STAMP := ui/dist/.stamp

.PHONY: deps build run ui test test-unit test-integration test-ui test-asan test-pg test-redis \
	soak bench bench-queue bench-pg bench-ui bench-auth bench-warm bench-million clean fuzz fuzz-deps

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja ui
	cmake --build $(BUILD) -j $(JOBS)

# npm ci only when the lockfile is newer than what is installed; the build
# only when a source (ui/src, docs/*.md) changed.
ui/node_modules/.package-lock.json: ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund
	touch $@

$(UI_STAMP): ui/node_modules/.package-lock.json $(UI_SRC)
	node ui/build.mjs
	touch $@

ui: deps $(UI_STAMP)

run: build
	./$(BUILD)/spiderd serve

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPIDERD_SANITIZE=ON

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The integration modules run in parallel, whole modules at a time
# (pytest-xdist): most of a test's time is spent waiting on crawls, timers
# and restarts, not on the CPU (bench/README.md, "The test suite's own time").
# PYTEST_JOBS=0 runs them one after another.
PYTEST_JOBS ?= 4
XDIST := $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS) --dist loadfile)

test-integration: build
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd /usr/bin/python3 -m pytest -q -x -p no:cacheprovider $(XDIST)

# The console in headless Chromium against a real daemon; screenshots of
# every page in both themes land in build/ui-shots/.
test-ui: build
	cd tests/ui && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd /usr/bin/python3 -m pytest -q -p no:cacheprovider

test-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(ASAN_BUILD)/spiderd SPIDERD_SANITIZED=1 \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider $(XDIST)

# Against a throwaway PostgreSQL and Redis (tests/store_suite.sh): the store
# contract tests, plain and sanitized, then the integration suite with the
# plain build, cluster tests included. PostgreSQL runs every module but those
# whose subject is the process, the HTTP layer or the requests refused before
# the store is asked (PG_TESTS= runs them all); Redis the modules below
# (REDIS_TESTS= runs them all). docs/reliability.md lists what runs where.
PG_TESTS ?= --ignore=test_runner.py --ignore=test_tls.py --ignore=test_cli.py \
	--ignore=test_objstore.py --ignore=test_objstore_eggs.py \
	--ignore=test_auth_cli.py --ignore=test_console_serve.py --ignore=test_load.py \
	--ignore=test_security.py --ignore=test_proxy.py --ignore=test_gzip.py
REDIS_TESTS ?= test_cluster.py test_api.py test_jobs.py test_queues.py test_schedules.py \
	test_unique_jobs.py test_events.py test_family.py test_auth.py test_outage.py \
	test_faults.py test_limits.py test_retention.py test_lifecycle.py test_robust.py \
	test_drain.py test_lastcred.py test_listing_pages.py test_sneakpeek.py test_grepsr.py \
	test_stats.py test_upcoming.py test_hooks.py test_job_meta.py test_test_runs.py \
	test_openapi_aliases.py test_multiprocess.py test_accounts.py test_backfill.py \
	test_health.py test_memory.py test_pause.py test_pyenvs_cluster.py test_after.py
test-pg: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/store_suite.sh postgresql $(BUILD) $(ASAN_BUILD) $(XDIST) $(PG_TESTS)

test-redis: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/store_suite.sh redis $(BUILD) $(ASAN_BUILD) $(XDIST) $(REDIS_TESTS)

# The cgroup v2 job limits (the cgroup half of test_limits.py), plain and
# sanitized, with CI=true, in a VM (qemu) on the kernel of Debian's
# linux-image-amd64, which tests/cgroupvm.sh fetches with apt-get download and
# keeps in $(BUILD)/cgroupvm/: this machine's cgroup controllers may be held
# by cgroup v1. One to two minutes without KVM.
.PHONY: test-cgroup
test-cgroup: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/cgroupvm.sh $(BUILD) $(ASAN_BUILD)

# The whole suite runs on SQLite under ASan + UBSan, and with the plain build
# on PostgreSQL (test-integration runs it plainly on SQLite too). The cgroup
# half of test_limits.py runs in test-cgroup's VM where this machine cannot
# run it (SPIDERD_CGROUP_IN_VM): skipped by the other runs, never untested.
test: test-unit test-ui test-pkg test-asan test-pg test-redis test-cgroup
test: export SPIDERD_CGROUP_IN_VM = 1

# kill -9 rounds (tests/integration/test_faults.py), many of them: on SQLite
# under ASan + UBSan, then with the plain build on a throwaway PostgreSQL,
# where the store outages (test_outage.py) run too, with the 30 s silent
# store (SPIDERD_TEST_BLACKHOLE) besides the cut. FAULT_SEED=N replays a
# failing run (each run logs its seed); about 9 minutes.
SOAK_ROUNDS ?= 50
soak: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd tests/integration && FAULT_ROUNDS=$(SOAK_ROUNDS) SPIDERD_BIN=$(CURDIR)/$(ASAN_BUILD)/spiderd \
		SPIDERD_SANITIZED=1 /usr/bin/python3 -m pytest -q -s -p no:cacheprovider test_faults.py
	dir=$$(mktemp -d /tmp/spiderd-soak-pg-XXXXXX) && chmod 755 "$$dir" && \
	url=$$(tests/pgserver.sh start "$$dir") && trap '$(CURDIR)/tests/pgserver.sh stop "'"$$dir"'"' EXIT && \
	cd tests/integration && FAULT_ROUNDS=$(SOAK_ROUNDS) SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd \
		SPIDERD_TEST_STORE_URL="$$url?schema={}" SPIDERD_TEST_BLACKHOLE=1 \
		/usr/bin/python3 -m pytest -q -s -p no:cacheprovider test_faults.py test_outage.py

bench: build
	./bench/run.sh $(CURDIR)/$(BUILD)/spiderd

bench-queue: build
	./bench/queue_bench.sh $(CURDIR)/$(BUILD)/spiderd

# PostgreSQL claims, nodes, failover (bench/README.md); about 9 minutes.
bench-pg: build
	./bench/pg_bench.sh $(CURDIR)/$(BUILD)/spiderd

# The console's first load over 100,000 finished jobs (bench/README.md).
bench-ui: build
	/usr/bin/python3 bench/ui_bench.py $(CURDIR)/$(BUILD)/spiderd

# What authentication costs a request (bench/README.md); about 30 s.
bench-auth: build
	cd bench && /usr/bin/python3 auth_bench.py $(CURDIR)/$(BUILD)/spiderd

# Crawl starts, spiderd cold vs warm templates, one warm crawl against the
# floor, and Scrapyd 1.6 run from its source when SCRAPYD_SRC names a git
# directory of it (bench/README.md); 8-15 minutes.
SCRAPYD_SRC ?=
bench-warm: build
	cd bench && /usr/bin/python3 warm_bench.py $(CURDIR)/$(BUILD)/spiderd \
		$(if $(SCRAPYD_SRC),--scrapyd-src $(abspath $(SCRAPYD_SRC)))

# One million pending jobs in SQLite: schedule.json, listings, claims, memory
# (bench/README.md, with how long it takes and what it needs in memory and disk).
bench-million: build
	/usr/bin/python3 bench/million_bench.py --bin $(CURDIR)/$(BUILD)/spiderd

# libFuzzer (fuzz/README.md): builds $(FUZZ_BUILD) with clang and runs every
# harness FUZZ_S seconds (FUZZ_TARGETS="http ops" for some), seeded from
# fuzz/corpus/NAME; a crash lands in fuzz/crashes/NAME/ and fails the target.
# Every build's CTest replays those corpora and crashes without clang.
FUZZ_BUILD ?= build-fuzz
FUZZ_S ?= 60
FUZZ_TARGETS ?=
fuzz-deps: deps
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(FUZZ_PKGS)"

$(FUZZ_BUILD)/build.ninja: | fuzz-deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_C_COMPILER=clang -DSPIDERD_FUZZ=ON

fuzz: fuzz-deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_S) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) ui/dist

# ---- packaging (docs/operations.md) ----
# The Debian package, built with dpkg-buildpackage into $(BUILD)/deb/
# (needs debhelper besides DEB_PKGS).
DEB_OUT ?= $(BUILD)/deb
.PHONY: deb test-pkg
deb: deps
	tests/pkg/build_deb.sh $(DEB_OUT)

# sd_notify against the real daemon, the systemd unit offline, the container
# and Kubernetes files statically, then the .deb built, installed, run as the
# spiderd user and purged (about 3 minutes).
test-pkg: build
	cd tests/pkg && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd /usr/bin/python3 -m pytest -q -p no:cacheprovider test_sdnotify.py
	tests/pkg/test_systemd.sh $(CURDIR)/$(BUILD)/spiderd
	/usr/bin/python3 tests/pkg/test_deploy.py $(CURDIR)/$(BUILD)/spiderd
	tests/pkg/test_deb.sh $(DEB_OUT)
