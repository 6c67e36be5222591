#!/usr/bin/env bash
# SPEC P2: VERSION is the one source of the release number. `scripts/set-version.sh 0.3.0` writes it there and
# into the places that must carry it at compile time (the engine's OutboxVersion, the mock's MockVersion, outbox.h's
# OUTBOX_VERSION_* macros); outbox.pc and the Debian packages read VERSION when they are made. VersionTests and
# `make c-test` fail when any of them disagrees with VERSION.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: scripts/set-version.sh MAJOR.MINOR.PATCH}
[[ "$version" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || { echo "set-version: '$version' is not MAJOR.MINOR.PATCH" >&2; exit 64; }
echo "$version" > "$root/VERSION"
sed -i "s/public static let string = \"[0-9.]*\"/public static let string = \"$version\"/" \
  "$root/Sources/Outbox/Analytics/DeviceContext.swift" "$root/MockServer/OutboxMock/MockVersion.swift"
sed -i -e "s/^#define OUTBOX_VERSION_MAJOR .*/#define OUTBOX_VERSION_MAJOR ${BASH_REMATCH[1]}/" \
  -e "s/^#define OUTBOX_VERSION_MINOR .*/#define OUTBOX_VERSION_MINOR ${BASH_REMATCH[2]}/" \
  -e "s/^#define OUTBOX_VERSION_PATCH .*/#define OUTBOX_VERSION_PATCH ${BASH_REMATCH[3]}/" "$root/include/outbox.h"
echo "set-version: $version (add its section to CHANGELOG.md)"
