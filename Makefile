# Outbox — the two commands: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
SWIFT ?= swift
# nginx and openssl: the transport tests run a real nginx (HTTP/1.1, TLS, HTTP/2) with a throwaway certificate.
# libdeflate: the compression benchmark's comparison (outbox-bench compression).
DEB_PACKAGES := libuv1-dev libsqlite3-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev pkg-config nginx openssl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR ?= /tmp/outbox-demo

.PHONY: deps build test unit demo cli-check bench fuzz screenshot clean

# $(call install-missing,PACKAGES,WHO): installs the Debian packages only when some are missing; `apt-get update`
# runs only then. A package must not start a service of its own (nginx would take port 80 and run on): for the
# install, a policy-rc.d answering 101 ("action forbidden", honoured by invoke-rc.d and deb-systemd-invoke) is put
# in place unless one exists, and removed afterwards.
define install-missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make $(2): installing$$missing"; \
	  policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '\043!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null && \
	    $(SUDO) chmod 755 /usr/sbin/policy-rc.d && policy=/usr/sbin/policy-rc.d; \
	  fi; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	  status=$$?; if [ -n "$$policy" ]; then $(SUDO) rm -f "$$policy"; fi; exit $$status; \
	fi
endef

deps:
	$(call install-missing,$(DEB_PACKAGES),deps)
	@command -v $(SWIFT) >/dev/null || { echo "make deps: swift is not on PATH (Swift 6 toolchain required)"; exit 1; }

build: deps
	$(SWIFT) build

# Builds everything (tests, the CLI, the mock server and the crash child), runs every test, then builds the release
# CLI as shipped and checks it end to end over HTTP and HTTPS (`make cli-check`).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(MAKE) cli-check

# The pure tests alone (OutboxUnitTests: no file, socket or child process), in seconds once built.
unit: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter OutboxUnitTests

demo: build
	$(SWIFT) run outbox demo

# The release CLI (Debian's libcurl) against a local server over HTTP and HTTPS, with and without --ca-file.
cli-check: deps
	$(call install-missing,python3 openssl nginx,cli-check)
	$(SWIFT) build -c release --product outbox
	scripts/cli-check.sh .build/release/outbox

# Speed and memory targets (BENCHMARKS.md). Release builds; takes a few minutes plus the 60 s idle measurement.
bench: deps
	$(SWIFT) build -c release --product outbox
	$(SWIFT) build -c release --product outbox-bench
	$(SWIFT) build -c release --product outbox-mock-bench
	$(SWIFT) build -c release --product outbox-peak-rss
	OUTBOX_CLI=.build/release/outbox .build/release/outbox-bench all
	.build/release/outbox-mock-bench
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter ReachabilityNamespaceTests

# Long randomized round trips of the fast gzip compressor through zlib's inflate (FastGzipTests; `make test` runs
# 200). FUZZ_ITERATIONS inputs (~7 ms each in a debug build), FUZZ_SEED to start elsewhere.
FUZZ_ITERATIONS ?= 50000
FUZZ_SEED ?= 5
fuzz: deps
	$(SWIFT) build --build-tests
	OUTBOX_FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) OUTBOX_FUZZ_SEED=$(FUZZ_SEED) \
	  $(SWIFT) test --skip-build --filter FastGzipTests.randomMixesOfRepeatsAndNoiseRoundTrip

# The mock server's live page in headless chromium (installs chromium when missing); writes mock-page.png.
screenshot: deps
	scripts/mock-screenshot.sh mock-page.png

clean:
	rm -rf .build
