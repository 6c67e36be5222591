# Outbox — the two commands: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
SWIFT ?= swift
# nginx and openssl: the transport tests run a real nginx (HTTP/1.1, TLS, HTTP/2) with a throwaway certificate.
DEB_PACKAGES := libuv1-dev libsqlite3-dev libcurl4-openssl-dev zlib1g-dev pkg-config nginx openssl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR ?= /tmp/outbox-demo

.PHONY: deps build test demo cli cli-order bench fuzz screenshot clean

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

# Builds everything (tests, the CLI, the mock server and the crash child), then runs every test; then builds the
# release CLI as shipped and checks it end to end over HTTP and HTTPS (`make cli`).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(MAKE) cli

demo: build
	$(SWIFT) run outbox demo

# The release CLI as shipped and measured (BENCHMARKS.md, memory): the Swift libraries and libstdc++ linked in
# statically, so that a process maps only the code it runs. Its own build directory: --static-swift-stdlib
# changes the build parameters, and sharing .build with the other release products would rebuild everything at
# each switch (first build ~5 min on 2 cores). libstdc++ is static when the -L directory below holds only its
# archive; without libstdc++.a it stays a shared library. scripts/build-curl.sh builds a libcurl with HTTP and
# HTTPS only from Debian's source (~1 min, once per libcurl version; without it, or without the network, the CLI
# keeps Debian's libcurl.so and says so); scripts/cli-ld links it in with Debian's static OpenSSL, using lld and
# the function order of scripts/cli-order.txt (`make cli-order` writes it). Every function in its own section, so
# that the linker can order them and drop the unused ones. The binary is removed first: SwiftPM does not see the
# order file or the curl archive as inputs of the link.
CLI_BUILD := $(CURDIR)/.build/cli
CLANG ?= clang
CLI_DEB_PACKAGES := libssl-dev dpkg-dev gcc make python3 openssl
CLI_FLAGS := -c release --static-swift-stdlib --scratch-path $(CLI_BUILD) --product outbox \
  -Xlinker -L$(CLI_BUILD)/static-libstdc++ -Xswiftc -use-ld=$(CURDIR)/scripts/cli-ld \
  -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections
cli: deps
	$(call install-missing,$(CLI_DEB_PACKAGES),cli)
	@mkdir -p $(CLI_BUILD)/static-libstdc++; archive="$$($(CLANG) -print-file-name=libstdc++.a)"; \
	if [ -f "$$archive" ]; then ln -sf "$$archive" $(CLI_BUILD)/static-libstdc++/libstdc++.a; \
	else echo "make cli: no libstdc++.a, libstdc++ stays shared"; fi
	@scripts/build-curl.sh $(CLI_BUILD)/curl 2>$(CLI_BUILD)/curl.log || { tail -5 $(CLI_BUILD)/curl.log; \
	  echo "make cli: warning: no small libcurl ($(CLI_BUILD)/curl.log): Debian's libcurl.so, ~4 MB more per process"; }
	rm -f $(CLI_BUILD)/release/outbox
	$(SWIFT) build $(CLI_FLAGS)
	@if nm $(CLI_BUILD)/release/outbox | grep -q __CFInitialize; then echo "make cli: warning: Foundation proper" \
	  "(CoreFoundation, ICU) is linked in: ~4 MB more per process; use FoundationEssentials (BENCHMARKS.md)"; fi
	@if ldd $(CLI_BUILD)/release/outbox | grep -q libcurl; then echo "make cli: warning: linked to Debian's libcurl.so"; fi
	scripts/cli-check.sh $(CLI_BUILD)/release/outbox
	@echo "make cli: $(CLI_BUILD)/release/outbox"

# Writes scripts/cli-order.txt: the functions `outbox emit` runs (tracking, then delivering to outbox-mock, then
# draining a stored backlog): those all runs share, then the rest, each group sorted by name, for scripts/cli-ld. Run it after changes to
# what emit executes, then `make cli` again. Needs valgrind (installed when missing).
cli-order: cli
	@command -v valgrind >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq valgrind; }
	$(SWIFT) build -c release --product outbox-mock
	scripts/cli-order.sh $(CLI_BUILD)/release/outbox .build/release/outbox-mock scripts/cli-order.txt
	$(MAKE) cli

# Speed and memory targets (BENCHMARKS.md). Release builds; takes a few minutes plus the 60 s idle measurement.
bench: deps cli
	$(SWIFT) build -c release --product outbox-bench
	$(SWIFT) build -c release --product outbox-mock-bench
	$(SWIFT) build -c release --product outbox-peak-rss
	OUTBOX_CLI=$(CLI_BUILD)/release/outbox .build/release/outbox-bench all
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
