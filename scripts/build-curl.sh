#!/usr/bin/env bash
# A small static libcurl for the release CLI (`make cli`; BENCHMARKS.md, memory).
#
#   scripts/build-curl.sh OUT_DIR        → OUT_DIR/libcurl.a, or exit status 1 and a reason on stderr
#
# Debian's libcurl.so.4 is built with every protocol and library it can use: loading it maps ~30 libraries
# (rtmp, gnutls, ldap, ssh2, gssapi/krb5, idn2, psl, brotli, zstd…) and applies ~45 000 relocations before the
# engine sends a byte — ~4 MB of a 25 MB process. This builds the same curl from Debian's own source package,
# at the version of the installed libcurl4-openssl-dev (so its headers match, and Debian's patches, security
# fixes included, are applied), with HTTP and HTTPS over OpenSSL only. The source comes through apt (a private
# list of deb-src entries in OUT_DIR/apt: the system's apt configuration is not touched), which checks it against
# Debian's signed Sources index. The result is cached: nothing is fetched or built again until the installed
# libcurl4-openssl-dev changes.
set -euo pipefail

out=${1:?usage: build-curl.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null) || {
    echo "build-curl: libcurl4-openssl-dev is not installed" >&2; exit 1; }
if [ -f "$out/libcurl.a" ] && [ "$(cat "$out/version" 2>/dev/null)" = "$version" ]; then
    exit 0
fi
rm -f "$out/libcurl.a" "$out/version"

. /etc/os-release
codename=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || { echo "build-curl: $keyring missing (not Debian?)" >&2; exit 1; }
command -v dpkg-source >/dev/null || { echo "build-curl: dpkg-source missing (package dpkg-dev)" >&2; exit 1; }

# The mirrors the system's apt uses for Debian (bookworm's images list them in debian.sources), else Debian's own.
archive=http://deb.debian.org/debian
security=http://deb.debian.org/debian-security
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri=$(awk '$1 == "URIs:" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
    [ -n "$uri" ] && archive=$uri
    uri=$(awk '$1 == "URIs:" && $2 ~ /security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
    [ -n "$uri" ] && security=$uri
fi

apt_dir=$out/apt
rm -rf "$apt_dir" "$out/src"
mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$out/src"
cat > "$apt_dir/parts/outbox-src.sources" <<EOF
Types: deb-src
URIs: $archive
Suites: $codename $codename-updates
Components: main
Signed-By: $keyring

Types: deb-src
URIs: $security
Suites: $codename-security
Components: main
Signed-By: $keyring
EOF
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/parts"
          -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User=root)
echo "build-curl: fetching Debian's source of curl $version" >&2
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$out/src" && apt-get "${apt_opts[@]}" -qq source --download-only "curl=$version" >&2)
# apt checked every file against the signed Sources index; the .dsc's own signature would need debian-keyring.
(cd "$out/src" && dpkg-source --no-check -x curl_*.dsc tree >&2)

# HTTP and HTTPS (OpenSSL) only; proxies, IPv6, the threaded resolver and Unix sockets stay. No zlib: the engine
# compresses request bodies itself and asks for no compressed answers. Function sections, so that the CLI's
# linker can place the functions the engine runs next to each other (scripts/cli-ld).
echo "build-curl: configuring and building libcurl.a" >&2
cd "$out/src/tree"
CFLAGS="-O2 -g0 -ffunction-sections -fdata-sections -fPIC" ./configure -q \
    --disable-shared --enable-static --with-openssl --without-zlib \
    --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp \
    --disable-pop3 --disable-imap --disable-smb --disable-smtp --disable-gopher --disable-mqtt --disable-ftp \
    --disable-file --disable-ntlm-wb --disable-manual \
    --without-libidn2 --without-libpsl --without-nghttp2 --without-brotli --without-zstd --without-librtmp \
    --without-libssh2 --without-libssh --without-gssapi \
    --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs >&2
make -s -C lib -j"$(nproc)" >&2
cp lib/.libs/libcurl.a "$out/libcurl.a"
echo "$version" > "$out/version"
rm -rf "$out/src"
echo "build-curl: $out/libcurl.a (curl $version)" >&2
