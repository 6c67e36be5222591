# Outbox — the two commands: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
SWIFT ?= swift
# nginx and openssl: the transport tests run a real nginx (HTTP/1.1, TLS, HTTP/2) with a throwaway certificate.
# libdeflate: the compression benchmark's comparison (outbox-bench compression).
DEB_PACKAGES := libuv1-dev libsqlite3-dev libcurl4-openssl-dev libssl-dev zlib1g-dev libdeflate-dev pkg-config nginx openssl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR ?= /tmp/outbox-demo
# SPEC E1: where `make install` puts include/outbox.h, lib/libOutbox.so.0 (+ the Swift runtime) and outbox.pc.
PREFIX ?= /usr/local
# The C tests and the Node example build against an installation here, as a host would.
C_PREFIX ?= $(CURDIR)/.build/c-prefix
NODE ?= node
export NODE
# Package.swift: the mock optimised in debug builds, for this repository's own tests (SPEC P3 keeps it out otherwise).
export OUTBOX_OPTIMIZE_MOCK := 1
# `make test` has built the debug mock, CLI and library once when it calls the CLI, C, install and Node checks; a no-op
# `swift build --product …` still costs 10–30 s of planning here, so they skip it then (BUILT=1).
BUILD_MOCK = $(if $(BUILT),:,$(SWIFT) build --product outbox-mock)
# The build those checks use: release (as shipped) when run alone, debug inside `make test`, whose own build made it
# already — no product is built twice there. The release build is exercised by `make bench`, `make deb` and
# `make torture`.
CHECK_CONFIG ?= release
export CHECK_CONFIG
CLIB = .build/$(CHECK_CONFIG)/libOutboxC.so

.PHONY: deps build test fleet-distributed fleet-distributed-small doc-check vendor-venv rotel compare unit demo cli-check c-lib install uninstall install-check swift-app deb deb-check c-install c-test node-example node-test bench fuzz sanitize sanitize-thread sanitize-address torture screenshot clean

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
	@command -v $(SWIFT) >/dev/null || { echo "make deps: swift is not on PATH (Swift 6.2 or later required)"; exit 1; }

# The CLI and what it links (the library, the mock, the fleet), in debug: `make demo` runs it, and `make test` builds
# the same products with the same flags inside its own build, so nothing is compiled twice. Never a plain `swift build`
# or `--build-tests`: those build every product of every dependency, swift-protobuf's protoc (C++, abseil) included,
# which nothing here runs.
build: deps
	$(SWIFT) build --product outbox

# Checks the documents first (`make doc-check`, a second) and `make compare`'s arithmetic (test_compare.py), then
# builds once, in debug, the test bundle and the executables its tests run (the CLI, the mock server, the crash child:
# the test targets depend on them), runs every test, builds libOutbox, then checks the CLI end to end over HTTP and
# HTTPS (`make cli-check`), the C interface, the install, Node and a Swift package depending on Outbox with that build.
# outbox-bench is built (not run) so that a change that breaks `make bench` fails here, not in a later measurement.
test: deps vendor-venv rotel
	$(MAKE) doc-check
	python3 scripts/compare/test_compare.py
	$(SWIFT) build --product OutboxPackageTests
	$(SWIFT) test --skip-build
	@# The distributed fleet runs built binaries only (no SwiftPM, which allows one build at a time): it runs beside the
	@# builds and checks after it rather than after them; its output follows theirs, and either failing fails the target.
	@# Its Debian packages are installed first: two apt-get at once would fight over dpkg's lock.
	$(call install-missing,python3 python3-venv haproxy iproute2,test)
	@$(MAKE) fleet-distributed-small > .build/fleet-distributed-small.log 2>&1 & fleet=$$!; status=0; \
	{ $(SWIFT) build --product OutboxC && $(SWIFT) build --product outbox-bench \
	  && $(MAKE) cli-check BUILT=1 CHECK_CONFIG=debug \
	  && $(MAKE) c-test BUILT=1 BUILT_CLIB=1 CHECK_CONFIG=debug \
	  && $(MAKE) install-check BUILT=1 BUILT_CLIB=1 CHECK_CONFIG=debug \
	  && $(MAKE) node-test BUILT=1 BUILT_CLIB=1 CHECK_CONFIG=debug \
	  && $(MAKE) swift-app; } || status=$$?; \
	wait $$fleet; fleet_status=$$?; cat .build/fleet-distributed-small.log; \
	if [ $$fleet_status -ne 0 ]; then echo "make test: fleet-distributed-small failed ($$fleet_status)"; exit 1; fi; \
	exit $$status

# Documents and comments point only at what the repository holds, Markdown code fences pair up, relative links
# resolve, every rule cited has its heading in docs/BEHAVIOUR.md, and NOTICE names every Swift package dependency
# (scripts/doc-check.py says what each check recognises). The self-test first: each check must catch a planted fault.
doc-check:
	$(call install-missing,python3,doc-check)
	python3 scripts/doc-check.py --self-test
	python3 scripts/doc-check.py

# SPEC D8: rotel, a real OpenTelemetry collector (its PyPI wheel's binary, unpacked under .build/rotel), for
# OTLPCollectorTests; without PyPI the tests skip and say so.
rotel:
	@scripts/rotel.sh .build/rotel || echo "make test: rotel is not available; OTLPCollectorTests will be skipped"

# The official Python clients (SPEC V6) for VendorClientsEndToEndTests: installed when missing, once; without
# python3 or PyPI the tests skip and say so, and `make test` goes on.
vendor-venv:
	@scripts/compare/venv.sh .build/vendor-venv || echo "make test: the vendor clients are not installed; VendorClientsEndToEndTests will be skipped"

# SPEC V6: the official clients of Segment, PostHog, Snowplow, Mixpanel (/track and /import), OpenTelemetry, Sensors
# Analytics and Amplitude and Outbox on each of its wires (GA4's too) through the same scenarios, each run on its own
# outbox-mock (nginx TLS front for Mixpanel and PostHog); each run's added delay over the client's steady run (SPEC
# D9a), whose arithmetic test_compare.py checks first (`make test` runs it too); writes compare/REPORT.md,
# compare/results.json and compare/compare.svg. Release builds; about 20 minutes once built. A subset:
# `.build/vendor-venv/bin/python scripts/compare/compare.py --only C,… --scenarios S,… --merge`.
compare: deps
	$(call install-missing,python3 python3-venv openssl nginx,compare)
	python3 scripts/compare/test_compare.py
	scripts/compare/venv.sh .build/vendor-venv --plot
	$(SWIFT) build -c release --product outbox
	$(SWIFT) build -c release --product outbox-mock
	.build/vendor-venv/bin/python scripts/compare/compare.py

# The pure tests alone (OutboxUnitTests: no file, socket or child process), in seconds once built.
unit: deps
	$(SWIFT) build --product OutboxPackageTests
	$(SWIFT) test --skip-build --filter OutboxUnitTests

# The binary itself, not `swift run`, which plans the build again (tens of seconds on a cold machine).
demo: build
	.build/debug/outbox demo

# The CLI (Debian's libcurl; release unless CHECK_CONFIG says otherwise) against a local server over HTTP and HTTPS,
# with and without --ca-file.
cli-check: deps
	$(call install-missing,python3 openssl nginx,cli-check)
	$(if $(BUILT),:,$(SWIFT) build -c $(CHECK_CONFIG) --product outbox)
	scripts/cli-check.sh .build/$(CHECK_CONFIG)/outbox

# SPEC E: libOutbox.so (the OutboxC product), a release build unless CHECK_CONFIG says otherwise.
c-lib: deps
	$(if $(BUILT_CLIB),:,$(SWIFT) build -c $(CHECK_CONFIG) --product OutboxC)

install: c-lib
	SWIFT="$(SWIFT)" scripts/install-c.sh $(CLIB) "$(PREFIX)"

# SPEC P5: removes exactly what `make install PREFIX=…` wrote (its lib/outbox/MANIFEST); nothing without one.
uninstall:
	scripts/uninstall-c.sh "$(PREFIX)"

# SPEC P5: docs/EMBEDDING.md's install, build, run and uninstall commands, run as written from a clean shell
# into a temporary prefix, against outbox-mock; the prefix must be empty afterwards.
install-check: c-lib
	$(BUILD_MOCK)
	BUILT_CLIB=$(BUILT_CLIB) scripts/install-check.sh .build/debug/outbox-mock

c-install: c-lib
	rm -rf "$(C_PREFIX)"
	SWIFT="$(SWIFT)" scripts/install-c.sh $(CLIB) "$(C_PREFIX)"

# SPEC E1–E3 from C: Tests/C/outbox_c_test.c, built only against the installed header, library and outbox.pc, on
# its own uv_loop_t and in own-thread mode, against outbox-mock. C_SANITIZE=address runs it under AddressSanitizer.
c-test: c-install
	$(BUILD_MOCK)
	scripts/c-test.sh "$(C_PREFIX)" .build/debug/outbox-mock

# SPEC P3: examples/swift-app depends on Outbox as another package does (by path here) and tests itself against the
# mock in-process. What a URL dependent's manifest holds (OUTBOX_OPTIMIZE_MOCK unset) — no unsafe flag on any library
# product but OutboxC — scripts/manifest-check.py reads from `swift package dump-package`. The app builds in
# this repository's .build with this repository's settings, so the targets compiled already are not compiled again
# (the mock, once more, took a minute per `make test`).
swift-app: deps
	python3 scripts/manifest-check.py "$(SWIFT)"
	$(SWIFT) build --package-path examples/swift-app --scratch-path .build --build-tests
	$(SWIFT) test --package-path examples/swift-app --scratch-path .build --skip-build

# SPEC P4: the Debian packages (outbox, liboutbox0, liboutbox-dev) in .build/deb, checked by lintian. The commands
# are built with the Swift runtime linked in statically, in their own scratch path (.build/deb-build).
deb: deps c-lib
	$(call install-missing,dpkg-dev fakeroot lintian binutils,deb)
	$(SWIFT) build -c release --static-swift-stdlib --scratch-path .build/deb-build --product outbox-mock
	$(SWIFT) build -c release --static-swift-stdlib --scratch-path .build/deb-build --product outbox
	SWIFT="$(SWIFT)" scripts/deb.sh .build/deb-build/release/outbox .build/deb-build/release/outbox-mock \
	  .build/release/libOutboxC.so .build/deb

# SPEC P4: the packages installed with apt into a fresh bookworm root (debootstrap, cached in .build/deb-check),
# host.c built there with pkg-config and run against the packaged outbox-mock. Not part of `make test`.
deb-check: deb
	$(call install-missing,debootstrap curl python3,deb-check)
	scripts/deb-check.sh .build/deb

# SPEC E4: the N-API addon of examples/node, built with the C compiler and Node's own headers.
node-example: c-install
	scripts/node-example.sh "$(C_PREFIX)"

# SPEC E4: node examples/node/demo.js against outbox-mock; skipped, and said so, without node or its headers.
node-test: c-install
	@status=0; scripts/node-example.sh "$(C_PREFIX)" || status=$$?; \
	if [ $$status = 3 ]; then echo "node-test: SKIPPED (node or its headers are not installed)"; exit 0; fi; \
	[ $$status = 0 ] || exit $$status; \
	$(BUILD_MOCK) && scripts/node-test.sh .build/debug/outbox-mock

# Speed and memory targets (BENCHMARKS.md). Release builds; takes a few minutes plus the 60 s idle measurement.
bench: deps
	$(SWIFT) build -c release --product outbox
	$(SWIFT) build -c release --product outbox-bench
	$(SWIFT) build -c release --product outbox-mock-bench
	$(SWIFT) build -c release --product outbox-peak-rss
	OUTBOX_CLI=.build/release/outbox .build/release/outbox-bench all
	.build/release/outbox-bench encode
	python3 scripts/destination-bench.py .build/release/outbox-bench 6
	python3 scripts/sealed-bench.py .build/release/outbox-bench 6
	$(MAKE) c-install
	scripts/c-bench.sh "$(C_PREFIX)" .build/release/outbox-bench
	.build/release/outbox-mock-bench
	$(SWIFT) build --product OutboxPackageTests
	$(SWIFT) test --skip-build --filter ReachabilityNamespaceTests

# libFuzzer over every parser that meets outside input (scripts/fuzz.sh; `outbox-fuzz --list` names the targets):
# FUZZ_RUNS inputs per target, the store target FUZZ_STORE_RUNS, built in release (-enable-testing, for the harness's
# @testable imports) with AddressSanitizer and LeakSanitizer on every input, in .build-fuzz (the normal build stays). Fails on any crash, hang (FUZZ_TIMEOUT s), leak or broken invariant. FUZZ_TARGETS picks some.
# Then the fast gzip compressor's long randomized round trips through zlib's inflate (FastGzipTests; `make test`
# runs 200): inputs up to its 32 KiB window and beyond, which libFuzzer's few-KiB inputs do not reach.
# FUZZ_ITERATIONS inputs (~7 ms each in a debug build), FUZZ_SEED to start elsewhere.
FUZZ_RUNS ?= 1000000
FUZZ_STORE_RUNS ?= 100000
FUZZ_TIMEOUT ?= 10
FUZZ_TARGETS ?=
FUZZ_ITERATIONS ?= 50000
FUZZ_SEED ?= 5
# Then the mock's vendor decoders (VendorFuzzTests; `make test` runs 2 000): VENDOR_FUZZ_ITERATIONS mutated captured
# requests of Segment, PostHog, Snowplow and Mixpanel, each of which must be answered and counted consistently.
VENDOR_FUZZ_ITERATIONS ?= 1000000
# And OTLP's path (OTLPVendorTests; protobuf and OTLP/JSON bodies of up to 50 records, about 0.25 ms an input).
OTLP_FUZZ_ITERATIONS ?= 100000
fuzz: deps
	$(call install-missing,python3,fuzz)
	SWIFT="$(SWIFT)" FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_STORE_RUNS=$(FUZZ_STORE_RUNS) FUZZ_TIMEOUT=$(FUZZ_TIMEOUT) \
	  scripts/fuzz.sh $(FUZZ_TARGETS)
	$(SWIFT) build --product OutboxPackageTests
	OUTBOX_FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) OUTBOX_FUZZ_SEED=$(FUZZ_SEED) \
	  $(SWIFT) test --skip-build --filter FastGzipTests.randomMixesOfRepeatsAndNoiseRoundTrip
	OUTBOX_FUZZ_ITERATIONS=$(VENDOR_FUZZ_ITERATIONS) OUTBOX_FUZZ_SEED=$(FUZZ_SEED) \
	  $(SWIFT) test --skip-build --filter VendorFuzzTests
	OUTBOX_FUZZ_ITERATIONS=$(OTLP_FUZZ_ITERATIONS) OUTBOX_FUZZ_SEED=$(FUZZ_SEED) \
	  $(SWIFT) test --skip-build --filter OTLPVendorTests.mutatedRequestsAreAnsweredAndCountedConsistently

# The whole suite under ThreadSanitizer, then AddressSanitizer (+ LeakSanitizer): not part of `make test`, several
# minutes each on two cores. Own scratch paths (.build-tsan, .build-asan), so the normal build stays. Any report, of
# the test runner or of a child it spawns (the CLI, outbox-mock, the crash child: sanitized builds too), fails the
# run; the only suppressions are scripts/tsan.supp and scripts/lsan.supp, each justified by the library at fault.
# OUTBOX_TIME_SCALE widens the few wall-clock bounds of the tests that the sanitizers' slowdown alone breaks.
SANITIZE_TIME_SCALE ?= 4
sanitize: sanitize-thread sanitize-address

sanitize-thread: deps
	SWIFT="$(SWIFT)" OUTBOX_TIME_SCALE=$(SANITIZE_TIME_SCALE) scripts/sanitize.sh thread

sanitize-address: deps
	SWIFT="$(SWIFT)" OUTBOX_TIME_SCALE=$(SANITIZE_TIME_SCALE) scripts/sanitize.sh address

# SPEC F6-F8, `make fleet-distributed` (not part of `make test`; about 4 minutes once built): two release mocks behind
# haproxy, a Locust master and two workers, 2 x 500 devices x 100 events under the flaky scenario — lost 0, no
# cross-mock duplicate —, then round robin with lost acknowledgements, which the accounting must catch (exit 1).
# As root one worker runs in a network namespace behind a veth pair. scripts/fleet-distributed.sh says how.
fleet-distributed: deps
	$(call install-missing,python3 python3-venv haproxy iproute2,fleet-distributed)
	$(SWIFT) build -c release --product outbox
	$(SWIFT) build -c release --product outbox-mock
	CHECK_CONFIG=release scripts/fleet-distributed.sh

# The same with 2 x 50 devices x 20 events and make test's debug build (part of `make test`).
fleet-distributed-small:
	$(call install-missing,python3 python3-venv haproxy iproute2,test)
	FLEET_DEVICES=50 FLEET_EVENTS=20 CHECK_CONFIG=debug scripts/fleet-distributed.sh

# `make torture`: kill -9 rounds, a full disk (tmpfs, root), wall-clock steps, corruption while stopped, key rotations
# killed mid-way (SPEC K1) and a soak, against the release CLI and mock, then the whole suite under ThreadSanitizer (scripts/sanitize.sh thread); writes
# torture/REPORT.md, torture/soak.svg and torture/results.json. Not part of `make test`: about 20 min on 2 cores,
# release builds included (torture/REPORT.md gives each part's minutes).
# TORTURE_ROUNDS (1000) and TORTURE_SOAK_S (120) scale it; TORTURE_ONLY=crash,disk,clock,corrupt,rotate,soak,tsan picks parts.
torture: deps
	$(call install-missing,python3,torture)
	$(SWIFT) build -c release --product outbox
	$(SWIFT) build -c release --product outbox-mock
	SWIFT="$(SWIFT)" TORTURE_TSAN_TIME_SCALE=$(SANITIZE_TIME_SCALE) python3 scripts/torture/torture.py

# The mock server's live page in headless chromium (installs chromium when missing); writes mock-page.png.
screenshot: deps
	scripts/mock-screenshot.sh mock-page.png

clean:
	rm -rf .build
