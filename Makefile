# Herald. Every target runs on the project's own Node 24 (the `node` devDependency), so the
# system Node only needs to be able to run `npm ci` once.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
export NODE_OPTIONS := --experimental-vm-modules --no-warnings=ExperimentalWarning

.PHONY: start test check install codegen codegen-check lint typecheck unit clean

start: install  ## run Herald (API + workers); embedded Postgres when DATABASE_URL is unset
	./bin/herald start

test: install codegen-check lint typecheck unit  ## the whole test suite, as CI runs it

install: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	@node -e 'const [major] = process.versions.node.split("."); if (major < 24) { console.error("Node 24 bootstrap failed: got " + process.version); process.exit(1) }'
	@touch $@

codegen: install  ## regenerate the server types and the SDK from openapi/openapi.yaml
	openapi-typescript openapi/openapi.yaml -o src/generated/api.ts
	openapi-ts -f codegen/openapi-ts.config.ts

codegen-check: codegen  ## fails when the committed generated code is stale against openapi/
	@if [ -n "$$(git status --porcelain -- src/generated sdk/src)" ]; then \
	  git status --short -- src/generated sdk/src; \
	  echo "Generated code is stale: run 'make codegen' and commit the result."; exit 1; fi

lint: install
	eslint .

typecheck: install
	tsc -p .

unit: install
	jest

clean:
	rm -rf node_modules .herald reports
