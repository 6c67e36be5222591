#!/usr/bin/env bash
# SPEC E4: builds examples/node/build/outbox.node against the libOutbox.so installed under PREFIX, with the C
# compiler and Node's own headers (-isystem; no node-gyp, which would download headers). No -Bsymbolic and no
# RTLD_DEEPBIND anywhere: libOutbox.so's uv_* references must bind to the uv_* that the node executable exports,
# so that the engine's handles live on Node's loop with Node's libuv.
# Usage: scripts/node-example.sh PREFIX   (exit 3: node or its headers are missing)
set -euo pipefail
prefix=$1
root=$(cd "$(dirname "$0")/.." && pwd)
node=$(command -v "${NODE:-node}" || true)
if [[ -z "$node" ]]; then echo "node-example: ${NODE:-node} is not on PATH"; exit 3; fi
headers=$(dirname "$(dirname "$(readlink -f "$node")")")/include/node
if [[ ! -e "$headers/node_api.h" ]]; then echo "node-example: no Node headers in $headers"; exit 3; fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$root/examples/node/build"
# shellcheck disable=SC2046
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -DNAPI_VERSION=8 -DNODE_GYP_MODULE_NAME=outbox \
  -isystem "$headers" $(pkg-config --cflags outbox) -o "$root/examples/node/build/outbox.node" \
  "$root/examples/node/addon.c" $(pkg-config --libs outbox) -Wl,-rpath,"$(pkg-config --variable=libdir outbox)"
echo "node-example: built examples/node/build/outbox.node ($("$node" --version), headers $headers)"
