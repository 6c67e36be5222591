#!/usr/bin/env bash
# The official Python clients of the vendors the mock speaks, at pinned versions (`wanted` below), in a virtual
# environment under .build/ (SPEC V6): used by `make compare` and by VendorClientsEndToEndTests in `make test`.
#
#   scripts/compare/venv.sh [DIR] [--plot]      # DIR defaults to .build/vendor-venv; --plot adds matplotlib
#
# Installs only what is missing: a stamp file in DIR lists what pip already installed there, so a second call
# costs nothing. Exits non-zero (and says why) when python3, its venv module or PyPI is not available.
set -uo pipefail
dir=.build/vendor-venv
plot=0
for arg in "$@"; do
    case $arg in
        --plot) plot=1 ;;
        *) dir=$arg ;;
    esac
done
wanted=(segment-analytics-python==2.4.0 posthog==7.91.1 snowplow-tracker==1.1.0 mixpanel==5.4.1
        opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
        sensorsanalyticssdk==1.11.0 amplitude-analytics==1.3.0)
[ "$plot" = 1 ] && wanted+=(matplotlib==3.11.2)
stamp=$dir/outbox-pinned.txt
missing=()
for requirement in "${wanted[@]}"; do
    grep -qxF "$requirement" "$stamp" 2>/dev/null || missing+=("$requirement")
done
[ ${#missing[@]} = 0 ] && exit 0
command -v python3 >/dev/null || { echo "vendor venv: no python3 on PATH"; exit 1; }
if [ ! -x "$dir/bin/python" ]; then
    python3 -m venv "$dir" || { echo "vendor venv: python3 -m venv failed (Debian: apt-get install python3-venv)"; exit 1; }
fi
echo "vendor venv: installing ${missing[*]} into $dir"
"$dir/bin/pip" install -q --disable-pip-version-check "${missing[@]}" \
    || { echo "vendor venv: pip install failed (no access to PyPI?)"; exit 1; }
printf '%s\n' "${missing[@]}" >> "$stamp"
