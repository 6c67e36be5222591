#!/usr/bin/env bash
# Fuzzes the C interface's JSON readers (Tests/C/json_fuzz.c) against the libOutbox installed under PREFIX.
# Usage: scripts/json-fuzz.sh PREFIX [ITERATIONS] [SEED]   (C_SANITIZE=address adds AddressSanitizer on the C side)
set -euo pipefail
prefix=$1
root=$(cd "$(dirname "$0")/.." && pwd)
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=(-std=gnu11 -O1 -g -Wall -Wextra -Werror)
if [[ -n "${C_SANITIZE:-}" ]]; then flags+=("-fsanitize=$C_SANITIZE" -fno-omit-frame-pointer); fi
# shellcheck disable=SC2046
"${CC:-cc}" "${flags[@]}" -o "$prefix/json_fuzz" "$root/Tests/C/json_fuzz.c" \
  $(pkg-config --cflags --libs outbox) -Wl,-rpath,"$(pkg-config --variable=libdir outbox)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$prefix/json_fuzz" "$dir" "${2:-1000000}" "${3:-1}"
