# The README's commands. Everything builds with CMake + Ninja; tests run under CTest.
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)

# Debian packages needed to build, run, test and benchmark spiderd.
DEB_PKGS := build-essential cmake ninja-build pkg-config \
	libuv1-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev libinih-dev \
	libzip-dev libicu-dev libcmocka-dev libpq-dev libhiredis-dev \
	libcurl4-openssl-dev libssl-dev \
	python3 python3-scrapy python3-pytest python3-requests python3-setuptools \
	wrk zip unzip curl redis-server postgresql python3-psycopg2

.PHONY: deps build run test test-unit test-integration test-asan test-pg test-redis bench bench-queue bench-pg clean

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/spiderd serve

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPIDERD_SANITIZE=ON

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-integration: build
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd /usr/bin/python3 -m pytest -q -x -p no:cacheprovider

test-asan: deps $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(ASAN_BUILD)/spiderd SPIDERD_SANITIZED=1 \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider

# The store contract tests (plain and sanitized) and the whole integration
# suite, cluster tests included, against a throwaway PostgreSQL server
# (tests/pgserver.sh: a free port, a temporary directory, stopped at the end).
PG_DIR ?= /tmp/spiderd-test-pg-$(shell id -u)
STORE_TESTS := test_store test_store_sched test_store_janitor test_store_queue test_store_async test_store_nodes
test-pg: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/pgserver.sh stop $(PG_DIR); \
	url=$$(tests/pgserver.sh start $(PG_DIR)) || exit 1; \
	trap 'tests/pgserver.sh stop $(PG_DIR)' EXIT; \
	for t in $(STORE_TESTS); do \
	  SPIDERD_TEST_STORE_URL="$$url?schema=t{}" ./$(BUILD)/$$t >/dev/null || { echo "$$t failed on PostgreSQL"; SPIDERD_TEST_STORE_URL="$$url?schema=t{}" ./$(BUILD)/$$t | tail -40; exit 1; }; \
	  SPIDERD_TEST_STORE_URL="$$url?schema=t{}" ./$(ASAN_BUILD)/$$t >/dev/null || { echo "$$t (sanitized) failed on PostgreSQL"; exit 1; }; \
	done; echo "store contract tests: passed on PostgreSQL"; \
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd SPIDERD_TEST_STORE_URL="$$url?schema={}" \
		SPIDERD_TEST_PG_DIR=$(PG_DIR) /usr/bin/python3 -m pytest -q -x -p no:cacheprovider

# The same against a throwaway Redis (tests/redisserver.sh).
REDIS_DIR ?= /tmp/spiderd-test-redis-$(shell id -u)
test-redis: build $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	tests/redisserver.sh stop $(REDIS_DIR); \
	url=$$(tests/redisserver.sh start $(REDIS_DIR)) || exit 1; \
	trap 'tests/redisserver.sh stop $(REDIS_DIR)' EXIT; \
	for t in $(STORE_TESTS); do \
	  SPIDERD_TEST_STORE_URL="$$url?prefix=t{}" ./$(BUILD)/$$t >/dev/null || { echo "$$t failed on Redis"; SPIDERD_TEST_STORE_URL="$$url?prefix=t{}" ./$(BUILD)/$$t | tail -40; exit 1; }; \
	  SPIDERD_TEST_STORE_URL="$$url?prefix=t{}" ./$(ASAN_BUILD)/$$t >/dev/null || { echo "$$t (sanitized) failed on Redis"; exit 1; }; \
	done; echo "store contract tests: passed on Redis"; \
	cd tests/integration && SPIDERD_BIN=$(CURDIR)/$(BUILD)/spiderd SPIDERD_TEST_STORE_URL="$$url?prefix={}" \
		/usr/bin/python3 -m pytest -q -x -p no:cacheprovider

test: test-unit test-integration test-asan test-pg test-redis

bench: build
	./bench/run.sh $(CURDIR)/$(BUILD)/spiderd

bench-queue: build
	./bench/queue_bench.sh $(CURDIR)/$(BUILD)/spiderd

# PostgreSQL claims, nodes, failover (bench/README.md); about 9 minutes.
bench-pg: build
	./bench/pg_bench.sh $(CURDIR)/$(BUILD)/spiderd

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
