#!/usr/bin/env bash
# SPEC P4: installs the three packages with apt into a fresh Debian bookworm root and uses them there as a user
# would: builds examples/c/host.c with `pkg-config outbox`, starts the packaged outbox-mock (which finds its named
# scenarios in /usr/share/outbox), runs the host against it and checks that every log arrived. The root is made
# once with debootstrap from Debian's registry and cached (.build/deb-check/bookworm.tar); each run unpacks a fresh
# copy. Needs root (chroot).
# Usage: scripts/deb-check.sh DEB-DIR
set -euo pipefail
debs=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(cat "$root/VERSION")
arch=$(dpkg --print-architecture)
cache="$root/.build/deb-check"
mirror=${DEB_MIRROR:-http://deb.debian.org/debian}
[[ $(id -u) == 0 ]] || { echo "deb-check: needs root for chroot (sudo make deb-check)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "deb-check: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
for package in outbox liboutbox0 liboutbox-dev; do
  [[ -f "$debs/${package}_${version}_${arch}.deb" ]] || { echo "deb-check: no $debs/${package}_${version}_${arch}.deb (make deb)" >&2; exit 1; }
done

mkdir -p "$cache"
if [[ ! -f "$cache/bookworm.tar" ]]; then
  echo "deb-check: debootstrap bookworm from $mirror (once; cached in $cache/bookworm.tar)"
  rm -rf "$cache/base"
  debootstrap --variant=minbase bookworm "$cache/base" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { echo "deb-check: debootstrap failed (see $cache/debootstrap.log)" >&2; exit 1; }
  tar -C "$cache/base" -cf "$cache/bookworm.tar" .
  rm -rf "$cache/base"
fi

chroot_dir=$(mktemp -d "$cache/root-XXXXXX")
cleanup() {
  [[ -n "${mock_pid:-}" ]] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
  umount "$chroot_dir/proc" 2>/dev/null || true
  rm -rf "$chroot_dir"
}
trap cleanup EXIT
tar -C "$chroot_dir" -xf "$cache/bookworm.tar"
mount -t proc proc "$chroot_dir/proc"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' > "$chroot_dir/usr/sbin/policy-rc.d" && chmod 755 "$chroot_dir/usr/sbin/policy-rc.d"
mkdir -p "$chroot_dir/debs" "$chroot_dir/work"
cp "$debs"/{outbox,liboutbox0,liboutbox-dev}_"${version}"_"${arch}".deb "$chroot_dir/debs/"
cp "$root/examples/c/host.c" "$chroot_dir/work/"
in_root() { chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }

echo "deb-check: apt installs the three packages and a C compiler in a fresh bookworm root"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends /debs/outbox_"${version}"_"${arch}".deb \
  /debs/liboutbox0_"${version}"_"${arch}".deb /debs/liboutbox-dev_"${version}"_"${arch}".deb gcc libc6-dev pkg-config >"$cache/apt.log" 2>&1 \
  || { tail -20 "$cache/apt.log"; echo "deb-check: FAIL apt could not install the packages" >&2; exit 1; }
in_root dpkg -s outbox liboutbox0 liboutbox-dev | grep -E '^(Package|Version|Status):' | paste - - - | sed 's/^/deb-check: /'
[[ $(in_root outbox --version) == "$version" && $(in_root outbox-mock --version) == "$version" ]] \
  || { echo "deb-check: FAIL the packaged commands do not say $version" >&2; exit 1; }
[[ $(in_root pkg-config --modversion outbox) == "$version" ]] || { echo "deb-check: FAIL outbox.pc" >&2; exit 1; }
if in_root systemctl is-enabled outbox-mock 2>/dev/null | grep -q enabled; then echo "deb-check: FAIL the unit is enabled" >&2; exit 1; fi
[[ -f "$chroot_dir/lib/systemd/system/outbox-mock.service" ]] || { echo "deb-check: FAIL no outbox-mock.service" >&2; exit 1; }

echo "deb-check: cc host.c \$(pkg-config --cflags --libs outbox libuv) inside the root"
in_root sh -c 'cd /work && cc host.c $(pkg-config --cflags --libs outbox libuv) -o host'

# The packaged mock on a free loopback port, with a scenario of the package (host.c stops at the first failed answer).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log="$cache/mock.log"
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/bin:/bin outbox-mock --port "$port" --scenario /usr/share/outbox/scenarios/ok.json >"$log" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$log" && break; sleep 0.1; done
grep -q 'listening on' "$log" || { cat "$log"; echo "deb-check: FAIL the packaged outbox-mock did not start" >&2; exit 1; }
output=$(in_root sh -c "cd /work && timeout 120 ./host http://127.0.0.1:$port /work/host.outbox")
echo "$output" | sed 's/^/deb-check: host: /' | cut -c1-200
unique=$(curl -fsS "http://127.0.0.1:$port/_mock/stats" | sed -n 's/.*"logs_unique" *: *\([0-9]*\).*/\1/p')
delivered=$(sed -n 's/.*"delivered":\([0-9]*\).*/\1/p' <<<"$output")
grep -q '^delivered$' <<<"$output" && [[ "$unique" -ge 103 && "$unique" == "$delivered" ]] \
  || { echo "deb-check: FAIL the mock has $unique logs, the host delivered ${delivered:-?}" >&2; exit 1; }
echo "deb-check: passed: the packages installed with apt in a fresh bookworm root; host.c built with pkg-config there delivered all $unique logs to the packaged outbox-mock with its ok scenario"
