# Herald. Every target runs on the project's own Node 24 (the `node` devDependency), so the
# system only needs an npm, of any Node version, to fetch that Node once (make install).
SHELL := /bin/bash
# The Node that runs npm ci on a fresh clone (.node/, from `make install`), behind the project's own.
BOOTSTRAP := .node
export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/$(BOOTSTRAP)/node_modules/.bin:$(PATH)
export NODE_OPTIONS := --experimental-vm-modules --no-warnings=ExperimentalWarning
# The exact version of the `node` devDependency (engines says ">=24", which this does not match).
NODE_VERSION := $(shell sed -n 's/^ *"node": "\([0-9][0-9.]*\)",\{0,1\}$$/\1/p' package.json)

.PHONY: start test check install build codegen codegen-check lint typecheck unit browser fuzz fuzz-ci fuzz-env clean dashboard sdk-build

start: install dashboard build  ## run Herald (API + workers); embedded Postgres when DATABASE_URL is unset
	./bin/herald start

# The whole test suite, as CI runs it (scripts/test.sh): install, codegen-check and the builds
# (stopping at the first failure), then unit and fuzz-ci (both, whatever the other did) with lint
# and typecheck beside them. Its last line counts every jest test and schemathesis test case that
# ran, a failed lint or typecheck as one failed: `N passed, M failed`.
test:
	@MAKE='$(MAKE)' bash scripts/test.sh

# npm ci runs on Node 24: run by an older system Node, npm warns about every package that needs 24
# (a wall of EBADENGINE). When the `node` on PATH is older, the `node` package the lockfile pins is
# installed first into $(BOOTSTRAP)/ by the system npm, alone and quietly (nothing in it checks
# engines); npm ci then runs on it. Once installed, node_modules/.bin/node is the Node on PATH.
install: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	@if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' 2>/dev/null; then \
	  echo "Installing Node $(NODE_VERSION) into $(BOOTSTRAP)/ to run npm on"; \
	  npm install --prefix $(BOOTSTRAP) --no-save --no-package-lock --engine-strict=false --loglevel=error --no-audit --no-fund node@$(NODE_VERSION); \
	fi
	npm ci --no-audit --no-fund --prefer-offline
	@node -e 'const [major] = process.versions.node.split("."); if (major < 24) { console.error("Node 24 bootstrap failed: got " + process.version); process.exit(1) }'
	@touch $@

# The web dashboard (dashboard/, on the generated SDK) bundled by esbuild into dist/dashboard/ (git-ignored),
# which the server serves at /dashboard. Rebuilt when its sources, the SDK or the lockfile change.
dashboard: install dist/dashboard/index.html
dist/dashboard/index.html: dashboard/build.ts dashboard/index.html $(shell find dashboard/src sdk/src -type f) package-lock.json
	node dashboard/build.ts

# The server compiled to JavaScript in build/ (git-ignored; tsconfig.build.json), which bin/herald
# runs while no file under src/ is newer than it: type stripping costs memory in every process
# (docs/PERFORMANCE.md). Rebuilt from scratch (a deleted module must not stay behind) when src/ changes.
build: install build/.built
# Emitted without type-checking (--noCheck): `make typecheck` checks the same code, and checking it
# twice made the build take as long as the typecheck.
build/.built: $(shell find src) tsconfig.json tsconfig.build.json package-lock.json
	rm -rf build
	tsc -p tsconfig.build.json --noCheck
	@touch $@

codegen: install  ## regenerate the server types and the SDK from openapi/openapi.yaml
	node codegen/api-types.ts
	openapi-ts -f codegen/openapi-ts.config.ts
	node codegen/sdk-version.ts

codegen-check: codegen  ## fails when the committed generated code is stale against openapi/
	@if [ -n "$$(git status --porcelain -- src/generated sdk/src/generated sdk/package.json)" ]; then \
	  git status --short -- src/generated sdk/src/generated sdk/package.json; \
	  echo "Generated code is stale: run 'make codegen' and commit the result."; exit 1; fi

lint: install
	eslint .

typecheck: install
	tsc -p .

# Also writes reports/jest-results.json (jest --json), which make test counts.
unit: install dashboard browser build
	@mkdir -p reports
	jest --json --outputFile=reports/jest-results.json

# Chromium for the tests of pages (test/support/browser.ts drives it with playwright-core, which
# never downloads a browser): Debian's package, installed when it is missing and we are root.
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	    echo "Chromium is missing: install Debian's chromium package (apt-get install chromium) as root."; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; }

# Contract fuzzing (schemathesis, pinned in requirements-fuzz.txt) against a live server on a fresh
# database; see scripts/fuzz.sh and schemathesis.toml. Reports go to reports/.
fuzz-env: .venv/.installed
.venv/.installed: requirements-fuzz.txt
	python3 -m venv .venv
	.venv/bin/python -m pip install --disable-pip-version-check --no-input -q -r requirements-fuzz.txt
	@touch $@

# 100 examples per operation keeps make test within its time on two cores; make fuzz goes deeper.
fuzz-ci: install fuzz-env build  ## 100 examples per operation (part of make test)
	bash scripts/fuzz.sh 100

fuzz: install fuzz-env build  ## 1,000 examples per operation
	bash scripts/fuzz.sh 1000

clean:
	rm -rf node_modules $(BOOTSTRAP) .herald .venv reports build dist sdk/dist

# The SDK package's build (sdk/dist: ESM, CommonJS, type declarations; tsup, see sdk/tsup.config.ts).
# `npm pack` and `npm publish` in sdk/ run it too (the package's prepack script), so a packed tarball
# is always built from the current source. Its tools are the repository's devDependencies, not the
# package's (which has none): on a fresh clone, `install` fetches them first. dist/ is emptied here,
# not by tsup: its builds (the Node entry, each browser entry) run side by side.
sdk-build: install
	cd sdk && rm -rf dist && tsup

# The fanout benchmark (bench/fanout.ts): the client libraries' ceiling against the simulators, the
# floor of a durable fanout (the same, each delivery written in plain SQL), both also run as Herald
# is (bin/herald-node's memory settings), then Herald end to end (20 notifications × 500 users,
# 20,000 installations), then a mixed run (a third each iOS, Android, web) against the libraries
# alone (web-push's own sendNotification for web), on a fresh database on DATABASE_URL's server
# (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
# `make bench-fanout BENCH_ARGS=--prefill` adds 1 million installations and 2 million deliveries first.
.PHONY: bench-fanout
bench-fanout: install build
	node bench/fanout.ts $(BENCH_ARGS)

# The broadcast benchmark (bench/broadcast.ts): 1 million installations prefilled, then the audience
# count for three filters, an `all: true` broadcast end to end against the fanout's ceiling (a*), with
# a probe `user_ids` send every 500 ms and every Herald process's RSS sampled every 250 ms, retention
# deleting its million deliveries while sends go on, a worker killed with SIGKILL mid-walk, and a
# walk cancelled mid-way; on a fresh database on DATABASE_URL's server, dropped at the end.
.PHONY: bench-broadcast
bench-broadcast: install build
	node bench/broadcast.ts

# The fanout's statements one at a time (bench/statements.ts): Postgres' CPU and the client's per
# delivery for each statement of a bench-fanout-sized fanout and its deliver batches, in transactions
# rolled back, on a fresh database on DATABASE_URL's server (which must run on this machine), dropped
# at the end.
.PHONY: bench-statements
bench-statements: install
	node bench/statements.ts

# The scheduled-send benchmark (bench/schedule.ts): 1,000 notifications scheduled for the same second,
# how long after it each started, pushed and ended (target: all started within 1 s), against the
# same number sent at once; on a fresh database on DATABASE_URL's server, dropped at the end.
.PHONY: bench-schedule
bench-schedule: install build
	node bench/schedule.ts

# The local-time benchmark (bench/local-time.ts): a broadcast to 100,000 installations spread over
# 30+ UTC offsets with `options.local_time` set so that some zones are due at once and Kathmandu's
# 15 minutes later: each due zone's pushes against its due instant (within 60 s), nothing written
# for the zones still waiting, and every Herald process's RSS flat while they wait; on a fresh
# database on DATABASE_URL's server, dropped at the end (about 17 minutes).
.PHONY: bench-local-time
bench-local-time: install build
	node bench/local-time.ts

# The retention benchmark (bench/retention.ts): 2 million old delivery rows (with events and keys)
# deleted by retention while sends run at a steady rate through the real app, their latency against
# the same load with nothing deleting, alternating in one run; on a fresh database on DATABASE_URL's
# server (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
.PHONY: bench-retention
bench-retention: install
	node bench/retention.ts

# The user-deliveries benchmark (bench/user-deliveries.ts): GET /api/v1/deliveries?user_id= pages
# (first, deep, empty) through the real app with 10 million deliveries in the table (target p99 ≤ 50
# ms), and the time to build their index plainly and concurrently; on a fresh database on
# DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
.PHONY: bench-user-deliveries
bench-user-deliveries: install
	node bench/user-deliveries.ts

# The audience-count benchmark (bench/audience-count.ts): POST /api/v1/audiences/count through the
# real app at 1,000,000 installations prefilled with generate_series, for `all: true`, one tag `eq`
# matching 10 %, and platform + tag `in` + active_within_days: the cold first run, then p50/p95 over 20
# warm runs against the goal (p95 ≤ 300 ms). On a fresh database on DATABASE_URL's server (default
# postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
.PHONY: bench-audience-count
bench-audience-count: install
	node bench/audience-count.ts

# The tag-summary benchmark (bench/tags.ts): at the same 1,000,000 installations, GET /api/v1/tags
# through the real app (p50/p95 over 50 reads against the goal p95 ≤ 300 ms), the first read of an
# application without a summary, and how long the worker's computation of the summary takes.
.PHONY: bench-tags
bench-tags: install
	node bench/tags.ts

# The API benchmark (bench/api.ts): Herald's API hot paths (PUT/PATCH/GET installation, POST event,
# GET notification and the list) under autocannon, against a bare express + pg ceiling doing the same
# work (bench/api-ceiling.ts) on the same tables, alternating rounds (Herald/ceiling req/s ≥ 0.6);
# then POST notification p99 at 50/s while a bench-fanout-sized fanout runs (≤ 25 ms). On a fresh
# database on DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), dropped at
# the end. `make bench-api BENCH_ARGS=--prefill` adds 1 million installations and 2 million deliveries first.
.PHONY: bench-api
bench-api: install build
	node bench/api.ts $(BENCH_ARGS)

# The chaos run (bench/chaos.ts): Herald's processes under real faults (worker and API kill -9,
# database connections terminated, a database restart and crash, providers refusing or silent, a
# stalled database),
# one table of what was lost, doubled or stuck and how fast it recovered. Not part of make test: a
# measurement of a few minutes, exit 0 whatever Herald did (non-zero only when the harness broke).
# CHAOS_SCENARIOS=a,b1 runs some; logs in reports/chaos/.
.PHONY: chaos
chaos: install build
	node bench/chaos.ts

# The soak run (bench/soak.ts): a steady mixed load (installations, sends, events, reads) against
# `herald start` and a second worker for SOAK_MINUTES (10): errors by status, database connections
# and each process's RSS at start and end, and RSS growth. Not part of make test; logs in reports/soak/.
.PHONY: soak
soak: install build
	node bench/soak.ts
