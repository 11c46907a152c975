#!/usr/bin/env bash
# install-deps.sh: installs everything Cicada needs to build and test on a
# fresh Debian 12 machine, including CRIU 4.x built from Debian's source
# with the project's patches (scripts/criu-patches/*.patch; a CRIU built
# without the current ones is built again). Idempotent: a second run only
# checks.
set -euo pipefail

# rustc, cargo and librust-openssl-dev: the Rust client (clients/rust),
# built offline with Debian's toolchain and Debian's crates.
APT_PKGS="build-essential pkg-config libtirpc-dev rpcsvc-proto libprotobuf-c-dev libssl-dev
 protobuf-c-compiler libzstd-dev libxxhash-dev libibverbs-dev clang
 libclang-rt-14-dev iproute2 dpkg-dev openssl
 libprotobuf-dev protobuf-compiler libnl-3-dev libnet1-dev libcap-dev libaio-dev
 libbsd-dev libgnutls28-dev libnftables-dev python3-protobuf python3 patch libcmocka-dev
 rustc cargo librust-openssl-dev podman runc
 slurmctld slurmd slurm-client libslurm-dev munge"
CRIU_MIN=4
CRIU_PATCHES=$(cd "$(dirname "$0")" && pwd)/criu-patches
CRIU_STAMP=/usr/local/share/cicada/criu-patches.sha256   # (the Makefile re-bundles CRIU when it changes)
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# missing_pkgs: those of APT_PKGS not installed, from one dpkg-query.
missing_pkgs() {
	local have p out=""
	# shellcheck disable=SC2086
	have=" $(dpkg-query -W -f='${db:Status-Abbrev}${Package}\n' $APT_PKGS 2>/dev/null |
		awk '/^ii/ { print substr($0, 4) }' | tr '\n' ' ')"
	for p in $APT_PKGS; do
		case $have in *" $p "*) ;; *) out="$out $p" ;; esac
	done
	echo "$out"
}

install_apt() {
	local need
	need=$(missing_pkgs)
	[ -z "$need" ] && return 0
	echo "deps: installing$need"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
}

# patches_sum: one checksum of the patches CRIU is built with.
patches_sum() {
	{ cat "$CRIU_PATCHES"/*.patch 2>/dev/null || true; } | sha256sum | cut -d' ' -f1
}

criu_ok() {
	command -v criu >/dev/null 2>&1 || return 1
	local v
	v=$(criu --version 2>/dev/null | sed -n 's/^Version: \([0-9]*\).*/\1/p')
	[ -n "$v" ] && [ "$v" -ge "$CRIU_MIN" ] && [ "$(cat "$CRIU_STAMP" 2>/dev/null)" = "$(patches_sum)" ]
}

install_criu() {
	criu_ok && return 0
	echo "deps: building CRIU from Debian's trixie source"
	local list=/etc/apt/sources.list.d/cicada-trixie-src.list
	local pin=/etc/apt/preferences.d/cicada-trixie
	if [ ! -f "$list" ]; then
		echo "deb-src http://deb.debian.org/debian trixie main" | $SUDO tee "$list" >/dev/null
		printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' | $SUDO tee "$pin" >/dev/null
		$SUDO apt-get update -qq
	fi
	local work
	work=$(mktemp -d /tmp/cicada-criu.XXXXXX)
	(cd "$work" && apt-get source --download-only criu/trixie >/dev/null 2>&1 || true)
	local tarball
	tarball=$(ls "$work"/criu_*.orig.tar.* 2>/dev/null | head -n1)
	if [ -z "$tarball" ]; then
		echo "deps: could not download the CRIU source tarball from trixie" >&2
		return 1
	fi
	tar -C "$work" -xf "$tarball"
	local src
	src=$(find "$work" -maxdepth 1 -type d -name 'criu-*' | head -n1)
	for p in "$CRIU_PATCHES"/*.patch; do
		[ -e "$p" ] || continue
		patch -s -p1 -d "$src" <"$p" ||
			{ echo "deps: $(basename "$p") does not apply to CRIU's source" >&2; rm -rf "$work"; return 1; }
	done
	make -C "$src" -j"$(nproc)" criu >/dev/null
	$SUDO make -C "$src" PREFIX=/usr/local install-criu >/dev/null
	$SUDO install -d /usr/local/include/criu /usr/local/share/cicada
	$SUDO cp "$src"/criu/include/criu-plugin.h "$src"/criu/include/criu-log.h /usr/local/include/criu/ 2>/dev/null || true
	patches_sum | $SUDO tee "$CRIU_STAMP" >/dev/null
	rm -rf "$work"
	criu_ok || { echo "deps: CRIU build finished but 'criu --version' is not >= $CRIU_MIN" >&2; return 1; }
}

install_apt
install_criu
echo "deps: ok ($(criu --version | head -n1))"
