#!/usr/bin/env bash
# The Swift toolchain's runtime libraries that an ELF file needs, directly or through each other, one path per line
# (the system's own libraries — libc, libuv, libcurl, libsqlite3, zlib — are left out: the system provides them).
# Used by scripts/install-c.sh and scripts/deb.sh. Usage: scripts/swift-runtime-deps.sh ELF-FILE
set -euo pipefail
swift=$(command -v "${SWIFT:-swift}") || { echo "swift-runtime-deps: ${SWIFT:-swift} is not on PATH: it locates the Swift runtime" >&2; exit 1; }
runtime=$(dirname "$(dirname "$(readlink -f "$swift")")")/lib/swift/linux
[[ -e "$runtime/libswiftCore.so" ]] || { echo "swift-runtime-deps: no Swift runtime in $runtime" >&2; exit 1; }
declare -A seen=()
pending=("$1")
while ((${#pending[@]})); do
  file=${pending[0]}
  pending=("${pending[@]:1}")
  for needed in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    if [[ -e "$runtime/$needed" && -z "${seen[$needed]:-}" ]]; then
      seen[$needed]=1
      readlink -f "$runtime/$needed"
      pending+=("$runtime/$needed")
    fi
  done
done
