#!/usr/bin/env bash
# SPEC E1, E3, P5: installs the C interface under PREFIX — include/outbox.h, lib/libOutbox.so.0 (SONAME) with its
# libOutbox.so link, the Swift runtime libraries it needs in lib/outbox/ (its RUNPATH is $ORIGIN/outbox: a host
# needs no Swift toolchain, and PREFIX/lib gets no libswiftCore.so of ours), and lib/pkgconfig/outbox.pc, which
# carries the compile, link and run-time (rpath) flags. lib/outbox/MANIFEST lists every file and directory written,
# for scripts/uninstall-c.sh.
# Usage: scripts/install-c.sh BUILT-LIBRARY PREFIX
set -euo pipefail
library=$1
prefix=$(realpath -m "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$root/VERSION")

# Without write access nothing is touched: say so, and what to do.
existing=$prefix
while [[ ! -e "$existing" ]]; do existing=$(dirname "$existing"); done
if [[ ! -w "$existing" ]] || { [[ -e "$prefix" ]] && [[ ! -w "$prefix" ]]; }; then
  echo "install-c: cannot write under $prefix ($existing is not writable): run it as a user who can (sudo make install PREFIX=$prefix) or choose another PREFIX, e.g. PREFIX=\$HOME/.local" >&2
  exit 1
fi

runtime_libraries=$("$root/scripts/swift-runtime-deps.sh" "$library")

# Directories this installation creates (removed again by uninstall when empty), then files.
created=() ancestors=() dir=$prefix
while [[ ! -d "$dir" ]]; do ancestors=("$dir" "${ancestors[@]}"); dir=$(dirname "$dir"); done
for dir in "${ancestors[@]}" "$prefix/include" "$prefix/lib" "$prefix/lib/pkgconfig" "$prefix/lib/outbox"; do
  [[ -d "$dir" ]] || { mkdir -p "$dir"; created+=("$dir"); }
done
files=()
install -m 644 "$root/include/outbox.h" "$prefix/include/outbox.h"; files+=("include/outbox.h")
install -m 755 "$library" "$prefix/lib/libOutbox.so.0"; files+=("lib/libOutbox.so.0")
ln -sf libOutbox.so.0 "$prefix/lib/libOutbox.so"; files+=("lib/libOutbox.so")

# The toolchain's libraries that libOutbox.so.0 needs (the system's own are left to the system).
declare -A copied=()
for path in $runtime_libraries; do
  needed=$(basename "$path")
  copied[$needed]=1
  install -m 644 "$path" "$prefix/lib/outbox/$needed"
  files+=("lib/outbox/$needed")
done

cat > "$prefix/lib/pkgconfig/outbox.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: outbox
Description: Offline-first analytics sync engine (C interface)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lOutbox -Wl,-rpath,\${libdir}
PC
files+=("lib/pkgconfig/outbox.pc")

{
  echo "# outbox $version installed under $prefix: what scripts/uninstall-c.sh removes (files, then the directories made)"
  printf 'file %s\n' "${files[@]}" "lib/outbox/MANIFEST"
  for ((i = ${#created[@]} - 1; i >= 0; i--)); do printf 'dir %s\n' "${created[i]}"; done
} > "$prefix/lib/outbox/MANIFEST"

# SPEC E3: Foundation proper (CoreFoundation, ICU's data) stays out; one `import Foundation` in Sources/Outbox brings it.
# A debug build (CHECK_CONFIG=debug: `make test` checks the library it built) is linked unstripped, and SwiftProtobuf's
# use of Foundation stays in it: it is installed with Foundation's runtime; the release build, as shipped, never is.
for heavy in libFoundation.so libFoundationInternationalization.so lib_FoundationICU.so; do
  if [[ -n "${copied[$heavy]:-}" && "${CHECK_CONFIG:-release}" != debug ]]; then
    echo "install-c: libOutbox.so.0 needs $heavy: a file of the library imports Foundation; import FoundationEssentials" >&2
    exit 1
  fi
done

# Nothing may be left for the dynamic linker to find in a toolchain the host does not have.
if missing=$(env -u LD_LIBRARY_PATH ldd "$prefix/lib/libOutbox.so.0" | grep 'not found'); then
  echo "install-c: libOutbox.so.0 would not load: $missing" >&2
  exit 1
fi
echo "installed outbox $version under $prefix (runtime in lib/outbox: ${!copied[*]})"
