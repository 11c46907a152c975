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
# criu, as bundled by Cicada's build (scripts/bundle-criu.sh).
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib/criu-deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/criu" "$@"
WRAP
chmod +x "$build/bin/criu"
