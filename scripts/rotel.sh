#!/usr/bin/env bash
# SPEC D8: a real OpenTelemetry collector for the OTLP destination's test: rotel, whose PyPI wheel ships its binary
# (rotel/rotel-agent). Unpacked under DIR (no system install, no pip install); nothing to do when it is there.
# Exit 0 when DIR/rotel/rotel-agent runs; 3, saying why, when it cannot be had (no python3, PyPI unreachable).
# Usage: scripts/rotel.sh DIR
set -uo pipefail
dir=$1
version=0.0.1a15
agent="$dir/rotel/rotel-agent"
if [ -x "$agent" ] && "$agent" --version >/dev/null 2>&1; then exit 0; fi
command -v python3 >/dev/null || { echo "rotel: python3 is not installed"; exit 3; }
mkdir -p "$dir/wheel"
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: "rotel==$version" -d "$dir/wheel" >/dev/null 2>&1; then
    echo "rotel: pip could not download rotel==$version (PyPI unreachable?)"
    exit 3
fi
wheel=$(ls "$dir"/wheel/rotel-"$version"-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "rotel: no wheel of rotel==$version for this machine"; exit 3; }
python3 -m zipfile -e "$wheel" "$dir" || { echo "rotel: cannot unpack $wheel"; exit 3; }
chmod +x "$agent"
"$agent" --version >/dev/null 2>&1 || { echo "rotel: $agent does not run here"; exit 3; }
echo "rotel: $("$agent" --version) unpacked under $dir"
