# Outbox — the two commands: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
SWIFT ?= swift
DEB_PACKAGES := libuv1-dev libsqlite3-dev libcurl4-openssl-dev zlib1g-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR ?= /tmp/outbox-demo

.PHONY: deps build test demo bench screenshot clean

# Installs the Debian packages only when some are missing; `apt-get update` runs only then.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(SWIFT) >/dev/null || { echo "make deps: swift is not on PATH (Swift 6 toolchain required)"; exit 1; }

build: deps
	$(SWIFT) build

# Builds everything (tests, the CLI, the mock server and the crash child), then runs every test.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

demo: build
	$(SWIFT) run outbox demo

# Speed and memory targets (BENCHMARKS.md). Release builds; takes a few minutes plus the 60 s idle measurement.
bench: deps
	$(SWIFT) build -c release --product outbox-bench
	$(SWIFT) build -c release --product outbox-mock-bench
	$(SWIFT) build -c release --product outbox
	.build/release/outbox-bench all
	.build/release/outbox-mock-bench
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter ReachabilityNamespaceTests

# The mock server's live page in headless chromium (installs chromium when missing); writes mock-page.png.
screenshot: deps
	scripts/mock-screenshot.sh mock-page.png

clean:
	rm -rf .build
