#!/usr/bin/env bash
# SPEC E1, E3: installs the C interface under PREFIX — include/outbox.h, lib/libOutbox.so.0 (SONAME) with its
# libOutbox.so link, the Swift runtime libraries it needs beside it (its RUNPATH is $ORIGIN: a host needs no
# Swift toolchain), and lib/pkgconfig/outbox.pc.
# Usage: scripts/install-c.sh BUILT-LIBRARY PREFIX
set -euo pipefail
library=$1
prefix=$2
root=$(cd "$(dirname "$0")/.." && pwd)
swift=$(command -v "${SWIFT:-swift}") || { echo "install-c: ${SWIFT:-swift} is not on PATH: it locates the Swift runtime to install" >&2; exit 1; }
runtime=$(dirname "$(dirname "$(readlink -f "$swift")")")/lib/swift/linux
[[ -e "$runtime/libswiftCore.so" ]] || { echo "install-c: no Swift runtime in $runtime" >&2; exit 1; }

install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 "$root/include/outbox.h" "$prefix/include/outbox.h"
install -m 755 "$library" "$prefix/lib/libOutbox.so.0"
ln -sf libOutbox.so.0 "$prefix/lib/libOutbox.so"

# The toolchain's libraries that libOutbox.so.0 needs, directly or through each other; the system's own (libc,
# libuv, libcurl, libsqlite3, zlib) are left to the system.
declare -A copied=()
pending=("$prefix/lib/libOutbox.so.0")
while ((${#pending[@]})); do
  file=${pending[0]}
  pending=("${pending[@]:1}")
  for needed in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    if [[ -e "$runtime/$needed" && -z "${copied[$needed]:-}" ]]; then
      copied[$needed]=1
      install -m 644 "$(readlink -f "$runtime/$needed")" "$prefix/lib/$needed"
      pending+=("$prefix/lib/$needed")
    fi
  done
done

# SPEC E3: Foundation proper (CoreFoundation, ICU's data) stays out; one `import Foundation` in Sources/Outbox brings it.
for heavy in libFoundation.so libFoundationInternationalization.so lib_FoundationICU.so; do
  if [[ -n "${copied[$heavy]:-}" ]]; then
    echo "install-c: libOutbox.so.0 needs $heavy: a file of the library imports Foundation; import FoundationEssentials" >&2
    exit 1
  fi
done

# Nothing may be left for the dynamic linker to find in a toolchain the host does not have.
if missing=$(env -u LD_LIBRARY_PATH ldd "$prefix/lib/libOutbox.so.0" | grep 'not found'); then
  echo "install-c: libOutbox.so.0 would not load: $missing" >&2
  exit 1
fi

major=$(sed -n 's/^#define OUTBOX_VERSION_MAJOR \([0-9]*\)/\1/p' "$root/include/outbox.h")
minor=$(sed -n 's/^#define OUTBOX_VERSION_MINOR \([0-9]*\)/\1/p' "$root/include/outbox.h")
patch=$(sed -n 's/^#define OUTBOX_VERSION_PATCH \([0-9]*\)/\1/p' "$root/include/outbox.h")
cat > "$prefix/lib/pkgconfig/outbox.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: outbox
Description: Offline-first analytics sync engine (C interface)
Version: $major.$minor.$patch
Cflags: -I\${includedir}
Libs: -L\${libdir} -lOutbox
PC
echo "installed outbox $major.$minor.$patch under $prefix (runtime: ${!copied[*]})"
