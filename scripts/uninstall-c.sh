#!/usr/bin/env bash
# SPEC P5: removes exactly what scripts/install-c.sh wrote under PREFIX, as its lib/outbox/MANIFEST lists: the files,
# then the directories the installation created, when they are empty. A prefix without that manifest holds no
# installation of ours: nothing is touched.
# Usage: scripts/uninstall-c.sh PREFIX
set -euo pipefail
prefix=$(realpath -m "${1:?usage: scripts/uninstall-c.sh PREFIX}")
manifest="$prefix/lib/outbox/MANIFEST"
if [[ ! -f "$manifest" ]]; then
  echo "uninstall-c: no Outbox installation under $prefix ($manifest is missing); nothing removed" >&2
  exit 1
fi
if [[ ! -w "$prefix/lib/outbox" ]]; then
  echo "uninstall-c: cannot write under $prefix: run it as the user who installed it (sudo make uninstall PREFIX=$prefix)" >&2
  exit 1
fi
# Read it all first: the manifest removes itself.
mapfile -t entries < <(grep -v '^#' "$manifest")
for entry in "${entries[@]}"; do
  kind=${entry%% *} path=${entry#* }
  case $kind in
    file) rm -f "$prefix/$path" ;;
    dir) rmdir "$path" 2>/dev/null || true ;;  # kept when something else lives there now
  esac
done
rmdir "$prefix/lib/outbox" 2>/dev/null || true
echo "uninstalled outbox from $prefix"
