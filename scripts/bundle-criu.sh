#!/usr/bin/env bash
# bundle-criu.sh BUILD: puts the CRIU that install-deps.sh built into
# BUILD/libexec/criu with every library it needs except glibc's own
# (BUILD/lib/criu-deps), and a BUILD/bin/criu wrapper that finds them, so
# a GPU node without CRIU or -dev packages runs this build's CRIU.
set -euo pipefail
build=$1
criu=$(command -v criu || echo /usr/local/sbin/criu)
[ -x "$criu" ] || { echo "bundle-criu: no criu found; run 'make deps'" >&2; exit 1; }
mkdir -p "$build/libexec" "$build/lib/criu-deps" "$build/bin"
cp -L "$criu" "$build/libexec/criu"
ldd "$criu" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r name path; do
	case $name in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) continue ;; esac
	cp -L "$path" "$build/lib/criu-deps/$name"
done
cat >"$build/bin/criu" <<'WRAP'
#!/bin/sh
# criu, as bundled by Cicada's build (scripts/bundle-criu.sh). Some
# hypervisors never deliver the hardware breakpoint with which CRIU's
# compel catches the end of its parasite, and criu then hangs in every
# dump. cicada-hwbp-probe finds out, once per boot (cached), and where
# breakpoints are not delivered CRIU_FAULT=130 makes criu trace syscalls
# instead. A CRIU_FAULT already set is left as it is.
here=$(dirname "$(readlink -f "$0")")
hwbp_delivered() {
	boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
	dir=/run/cicada
	[ -d "$dir" ] && [ -w "$dir" ] || mkdir -p "$dir" 2>/dev/null || dir=${XDG_RUNTIME_DIR:-/tmp}
	cache=$dir/criu-hwbp.$(id -u)
	if [ -f "$cache" ] && [ -O "$cache" ] && read -r b v <"$cache" && [ "$b" = "$boot" ]; then
		[ "$v" = yes ]
		return
	fi
	if "$here/../libexec/cicada-hwbp-probe" >/dev/null 2>&1; then v=yes; else v=no; fi
	tmp=$(mktemp "$cache.XXXXXX" 2>/dev/null) && echo "$boot $v" >"$tmp" && mv -f "$tmp" "$cache"
	[ "$v" = yes ]
}
if [ -z "${CRIU_FAULT:-}" ] && ! hwbp_delivered; then
	CRIU_FAULT=130
	export CRIU_FAULT
fi
LD_LIBRARY_PATH="$here/../lib/criu-deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/criu" "$@"
WRAP
chmod +x "$build/bin/criu"
