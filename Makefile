# Herald. Every target runs on the project's own Node 24 (the `node` devDependency), so the
# system Node only needs to be able to run `npm ci` once.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
export NODE_OPTIONS := --experimental-vm-modules --no-warnings=ExperimentalWarning

.PHONY: start test check install codegen codegen-check lint typecheck unit fuzz fuzz-ci fuzz-env clean

start: install  ## run Herald (API + workers); embedded Postgres when DATABASE_URL is unset
	./bin/herald start

# The whole test suite, as CI runs it (scripts/test.sh): install, codegen-check, lint, typecheck
# (stopping at the first failure), then unit and fuzz-ci (both, whatever the other did). Its last
# line counts every jest test and schemathesis test case that ran: `N passed, M failed`.
test:
	@MAKE='$(MAKE)' bash scripts/test.sh

install: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@node -e 'const [major] = process.versions.node.split("."); if (major < 24) { console.error("Node 24 bootstrap failed: got " + process.version); process.exit(1) }'
	@touch $@

codegen: install  ## regenerate the server types and the SDK from openapi/openapi.yaml
	node codegen/api-types.ts
	openapi-ts -f codegen/openapi-ts.config.ts

codegen-check: codegen  ## fails when the committed generated code is stale against openapi/
	@if [ -n "$$(git status --porcelain -- src/generated sdk/src)" ]; then \
	  git status --short -- src/generated sdk/src; \
	  echo "Generated code is stale: run 'make codegen' and commit the result."; exit 1; fi

lint: install
	eslint .

typecheck: install
	tsc -p .

# Also writes reports/jest-results.json (jest --json), which make test counts.
unit: install
	@mkdir -p reports
	jest --json --outputFile=reports/jest-results.json

# Contract fuzzing (schemathesis, pinned in requirements-fuzz.txt) against a live server on a fresh
# database; see scripts/fuzz.sh and schemathesis.toml. Reports go to reports/.
fuzz-env: .venv/.installed
.venv/.installed: requirements-fuzz.txt
	python3 -m venv .venv
	.venv/bin/python -m pip install --disable-pip-version-check --no-input -q -r requirements-fuzz.txt
	@touch $@

fuzz-ci: install fuzz-env  ## 200 examples per operation (part of make test)
	bash scripts/fuzz.sh 200

fuzz: install fuzz-env  ## 1,000 examples per operation
	bash scripts/fuzz.sh 1000

clean:
	rm -rf node_modules .herald .venv reports

# The fanout benchmark (bench/fanout.ts): the client libraries' ceiling against the simulators, then
# Herald end to end (20 notifications × 500 users, 20,000 installations) on a fresh database on
# DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
.PHONY: bench-fanout
bench-fanout: install
	node bench/fanout.ts

# The retention benchmark (bench/retention.ts): 2 million old delivery rows (with events and keys)
# deleted by retention while sends run at a steady rate through the real app, their latency against
# the same load with nothing deleting, alternating in one run; on a fresh database on DATABASE_URL's
# server (default postgres://postgres@127.0.0.1:5432/postgres), dropped at the end.
.PHONY: bench-retention
bench-retention: install
	node bench/retention.ts

# The chaos run (bench/chaos.ts): Herald's processes under real faults (worker and API kill -9,
# database connections terminated, a database restart and crash, providers refusing or silent),
# one table of what was lost, doubled or stuck and how fast it recovered. Not part of make test: a
# measurement of a few minutes, exit 0 whatever Herald did (non-zero only when the harness broke).
# CHAOS_SCENARIOS=a,b1 runs some; logs in reports/chaos/.
.PHONY: chaos
chaos: install
	node bench/chaos.ts

# The soak run (bench/soak.ts): a steady mixed load (installations, sends, events, reads) against
# `herald start` and a second worker for SOAK_MINUTES (10): errors by status, database connections
# and each process's RSS at start and end, and RSS growth. Not part of make test; logs in reports/soak/.
.PHONY: soak
soak: install
	node bench/soak.ts
