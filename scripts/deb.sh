#!/usr/bin/env bash
# SPEC P4: the Debian packages, from the release builds, into OUT (default .build/deb):
#   outbox_V_ARCH.deb         outbox and outbox-mock (Swift runtime linked in statically), the named scenarios in
#                             /usr/share/outbox/scenarios, an outbox-mock.service unit (installed, not enabled)
#   liboutbox0_V_ARCH.deb     libOutbox.so.0 and the Swift runtime it needs in its own directory (RUNPATH
#                             $ORIGIN/outbox), with its shlibs and the ldconfig trigger
#   liboutbox-dev_V_ARCH.deb  outbox.h, the libOutbox.so link, outbox.pc
# Each depends on Debian's packages by name (the package that holds each library the binaries need), carries
# /usr/share/doc/PACKAGE/copyright (Outbox's licence and every third-party component inside, from NOTICE) and is
# checked by lintian: any error fails the run; warnings are printed.
# Usage: scripts/deb.sh CLI MOCK LIBRARY [OUT]
set -euo pipefail
cli=$1 mock=$2 library=$3
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${4:-$root/.build/deb}")
missing=()
for tool in dpkg-deb dpkg-architecture fakeroot lintian; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "deb: missing ${missing[*]}: apt-get install dpkg-dev fakeroot lintian (make deb installs them as root)" >&2
  exit 1
fi
for file in "$cli" "$mock" "$library"; do [[ -f "$file" ]] || { echo "deb: $file is not built (make deb builds it)" >&2; exit 1; }; done
version=$(cat "$root/VERSION")
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
maintainer="Outbox maintainers <maintainers@outbox-analytics.org>"
staging="$out/staging"
rm -rf "$staging"
mkdir -p "$staging"

# Debian's packages that provide the libraries an ELF file needs (libOutbox.so.0 and the Swift runtime that
# liboutbox0 ships left out), with the installed version as the least.
depends_of() {
  local needed path package version
  for needed in $(for f in "$@"; do readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; done | sort -u); do
    [[ -e "$staging/liboutbox0/usr/lib/$multiarch/outbox/$needed" || "$needed" == libOutbox.so.0 ]] && continue
    path=$(ldconfig -p | awk -v lib="$needed" '$1 == lib && /x86-64|x86_64/ {print $NF; exit}')
    [[ -n "$path" ]] || { echo "deb: no system library $needed" >&2; exit 1; }
    package=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) \
      || package=$(dpkg -S "$path" | head -1 | cut -d: -f1)
    version=$(dpkg-query -W -f='${Version}' "$package" | sed 's/-[^-]*$//; s/+.*$//')
    echo "$package (>= $version)"
  done | sort -u | paste -sd, | sed 's/,/, /g'
}

# docs: copyright (NOTICE's list of what is inside) and a changelog, both as Debian policy places them.
docs() {
  local package=$1 dir="$staging/$1/usr/share/doc/$1"
  mkdir -p "$dir"
  {
    echo "This is $package, part of Outbox $version: an offline-first analytics sync engine."
    echo
    echo "Copyright 2026 The Outbox authors"
    echo "License: Apache-2.0"
    echo " On Debian systems, the full text of the Apache License 2.0 is in"
    echo " /usr/share/common-licenses/Apache-2.0."
    echo
    echo "The third-party components the binaries contain, each with its licence (Outbox's NOTICE file):"
    echo
    sed 's/^/ /; s/^ $/ ./' "$root/NOTICE"
  } > "$dir/copyright"
  printf '%s (%s) unstable; urgency=medium\n\n  * Release %s: see CHANGELOG.md.\n\n -- %s  %s\n' \
    "$package" "$version" "$version" "$maintainer" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}")" \
    | gzip -9n > "$dir/changelog.gz"
}

control() {
  local package=$1 depends=$2 section=$3 description=$4
  mkdir -p "$staging/$package/DEBIAN"
  local size
  size=$(du -sk --exclude=DEBIAN "$staging/$package" | cut -f1)
  cat > "$staging/$package/DEBIAN/control" <<CONTROL
Package: $package
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Section: $section
Priority: optional
Homepage: https://github.com/outbox-analytics/outbox
Description: $description
CONTROL
}

build() {
  local package=$1
  find "$staging/$package" -type d -exec chmod 755 {} +
  fakeroot dpkg-deb --root-owner-group -Zxz --build "$staging/$package" "$out/${package}_${version}_${arch}.deb" >/dev/null
  echo "deb: $out/${package}_${version}_${arch}.deb"
}

# outbox: the CLI and the mock.
p="$staging/outbox"
install -D -m 755 "$cli" "$p/usr/bin/outbox"
install -D -m 755 "$mock" "$p/usr/bin/outbox-mock"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$p/usr/bin/outbox" "$p/usr/bin/outbox-mock"
mkdir -p "$p/usr/share/outbox"
cp -rL "$root/MockServer/OutboxMock/Scenarios" "$p/usr/share/outbox/scenarios"
find "$p/usr/share/outbox" -type f -exec chmod 644 {} +
install -D -m 644 "$root/contrib/systemd/outbox-mock.service" "$p/lib/systemd/system/outbox-mock.service"
# swift-nio-extras' HTTP compression carries its own zlib (symbols prefixed cnioextras_z_, NOTICE section 2), linked
# in with it; Debian's zlib1g is what Outbox itself uses. Said to lintian, which finds zlib's strings.
mkdir -p "$p/usr/share/lintian/overrides"
cat > "$p/usr/share/lintian/overrides/outbox" <<OVERRIDES
# swift-nio-extras (NIOHTTPCompression) vendors zlib with prefixed symbols; it is linked statically with it.
outbox: embedded-library zlib [usr/bin/outbox]
outbox: embedded-library zlib [usr/bin/outbox-mock]
OVERRIDES
chmod 644 "$p/usr/share/lintian/overrides/outbox"
docs outbox
control outbox "$(depends_of "$p/usr/bin/outbox" "$p/usr/bin/outbox-mock")" devel \
  "offline-first analytics sync engine: command line and mock server
 outbox records analytics logs durably in SQLite and delivers them in batches to
 OpenTelemetry collectors, PostHog, Segment-compatible servers or App Center's
 wire, through outages and restarts. This package holds the outbox command
 (emit, status, dead-letters, demo, fleet load tests) and outbox-mock, a
 fault-injecting mock ingestion server, with a systemd unit that is not enabled."
build outbox

# liboutbox0: the library and the Swift runtime it needs, in a directory of its own.
p="$staging/liboutbox0"
libdir="$p/usr/lib/$multiarch"
install -D -m 644 "$library" "$libdir/libOutbox.so.0"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$libdir/libOutbox.so.0"
mkdir -p "$libdir/outbox"
for path in $("$root/scripts/swift-runtime-deps.sh" "$library"); do
  install -m 644 "$path" "$libdir/outbox/$(basename "$path")"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$libdir/outbox/$(basename "$path")"
done
docs liboutbox0
control liboutbox0 "$(depends_of "$libdir/libOutbox.so.0" "$libdir"/outbox/*.so)" libs \
  "offline-first analytics sync engine: C library
 libOutbox records analytics logs durably in SQLite and delivers them in
 batches over HTTP, on its own thread or on the host's libuv loop. This
 package holds libOutbox.so.0 and the Swift runtime it needs, in a directory
 of its own."
echo "libOutbox 0 liboutbox0 (>= $version)" > "$p/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$p/DEBIAN/triggers"
chmod 644 "$p/DEBIAN/shlibs" "$p/DEBIAN/triggers"
build liboutbox0

# liboutbox-dev: what a host compiles and links with.
p="$staging/liboutbox-dev"
install -D -m 644 "$root/include/outbox.h" "$p/usr/include/outbox.h"
mkdir -p "$p/usr/lib/$multiarch/pkgconfig"
ln -s libOutbox.so.0 "$p/usr/lib/$multiarch/libOutbox.so"
cat > "$p/usr/lib/$multiarch/pkgconfig/outbox.pc" <<PC
prefix=/usr
includedir=\${prefix}/include
libdir=\${prefix}/lib/$multiarch

Name: outbox
Description: Offline-first analytics sync engine (C interface)
Version: $version
Cflags: -I\${includedir}
Libs: -lOutbox
PC
chmod 644 "$p/usr/lib/$multiarch/pkgconfig/outbox.pc"
docs liboutbox-dev
control liboutbox-dev "liboutbox0 (= $version), libuv1-dev" libdevel \
  "offline-first analytics sync engine: C development files
 The header outbox.h, the libOutbox.so link and outbox.pc, for building C and
 C++ programs (and Node.js addons) against libOutbox."
build liboutbox-dev

# lintian: errors fail the run, warnings are shown.
report=$(lintian --tag-display-limit 0 "$out"/*_"${version}"_"${arch}".deb 2>&1 || true)
echo "$report" | sed 's/^/lintian: /'
if grep -q '^E:' <<<"$report"; then echo "deb: lintian reports errors" >&2; exit 1; fi
echo "deb: lintian: $(grep -c '^E:' <<<"$report" || true) errors, $(grep -c '^W:' <<<"$report" || true) warnings"
