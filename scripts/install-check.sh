#!/usr/bin/env bash
# SPEC P5: runs docs/EMBEDDING.md's install-check block as written, in a clean environment (no PKG_CONFIG_PATH, no
# LD_LIBRARY_PATH), with /opt/outbox replaced by a temporary prefix and the URL by a running outbox-mock's. Passes
# when the host delivered its logs, the prefix is empty after `make uninstall`, and a second uninstall is refused
# without touching anything.
# Usage: scripts/install-check.sh OUTBOX-MOCK
set -euo pipefail
mock=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/start-mock.sh"
start_mock "$mock"
work=$(mktemp -d /tmp/outbox-install-check-XXXXXX)
trap 'kill $mock_pid 2>/dev/null; wait $mock_pid 2>/dev/null; rm -rf "$work" "$mock_log"' EXIT
prefix="$work/prefix"
commands=$(sed -n '/<!-- install-check/,/<!-- \/install-check -->/p' "$root/docs/EMBEDDING.md" | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d')
[[ $(grep -c . <<<"$commands") -ge 5 ]] || { echo "install-check: FAIL no install-check block in docs/EMBEDDING.md"; exit 1; }
install_part=$(grep -v '^make uninstall' <<<"$commands")
uninstall_part=$(grep '^make uninstall' <<<"$commands")
substitute() { sed -e "s|/opt/outbox|$prefix|g" -e "s|http://127.0.0.1:8080|$url|g" -e "s|/tmp/host.outbox|$work/host.outbox|g" -e "s|-o host|-o $work/host|" -e "s|^\./host|$work/host|"; }
# The build configuration and "built already" are passed on, so that EMBEDDING's `make install` installs the library
# this run checks (debug inside `make test`) instead of building another.
clean_shell() { (cd "$root" && env -i PATH="$PATH" HOME="$work" SWIFT="${SWIFT:-swift}" CHECK_CONFIG="${CHECK_CONFIG:-release}" \
  BUILT_CLIB="${BUILT_CLIB:-}" bash -euo pipefail -c "$1"); }

output=$(clean_shell "$(substitute <<<"$install_part")")
grep -q "uv_loop_close: 0" <<<"$output" || { echo "install-check: FAIL the host did not end clean:"; echo "$output"; exit 1; }
[[ -z $(find "$prefix/lib" -maxdepth 1 -name 'libswift*') ]] || { echo "install-check: FAIL the Swift runtime is in PREFIX/lib"; exit 1; }
readelf -d "$prefix/lib/libOutbox.so.0" | grep -q 'RUNPATH.*\$ORIGIN/outbox' || { echo "install-check: FAIL RUNPATH is not \$ORIGIN/outbox"; exit 1; }
unique=$(curl -fsS "$url/_mock/stats" | sed -n 's/.*"logs_unique" *: *\([0-9]*\).*/\1/p')
[[ "$unique" -ge 100 ]] || { echo "install-check: FAIL the mock has $unique logs"; exit 1; }

clean_shell "$(substitute <<<"$uninstall_part")" >/dev/null
if [[ -e "$prefix" ]]; then echo "install-check: FAIL left behind:"; find "$prefix"; exit 1; fi
mkdir -p "$prefix/lib" && touch "$prefix/lib/theirs.so"
if clean_shell "$(substitute <<<"$uninstall_part")" 2>"$work/err"; then echo "install-check: FAIL uninstall without an installation succeeded"; exit 1; fi
grep -q "no Outbox installation" "$work/err" && [[ -e "$prefix/lib/theirs.so" ]] \
  || { echo "install-check: FAIL uninstall without an installation: $(cat "$work/err")"; exit 1; }
# Without write access nothing is touched, and the message says what to run (root can write anywhere: the check
# runs as nobody).
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
  chmod 755 "$work" && mkdir -m 755 "$work/readonly"
  if setpriv --reuid=65534 --regid=65534 --clear-groups env PATH="$PATH" "$root/scripts/install-c.sh" \
      "$root/.build/${CHECK_CONFIG:-release}/libOutboxC.so" "$work/readonly/prefix" 2>"$work/err"; then
    echo "install-check: FAIL an install without write access succeeded"; exit 1
  fi
  grep -q "cannot write under .*sudo make install" "$work/err" && [[ -z $(ls -A "$work/readonly") ]] \
    || { echo "install-check: FAIL install without write access: $(cat "$work/err")"; exit 1; }
fi
echo "install-check: EMBEDDING's commands installed, built and ran a host ($unique logs delivered) and uninstalled, leaving nothing; a second uninstall and an install without write access were refused"
