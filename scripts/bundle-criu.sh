#!/usr/bin/env bash
# bundle-criu.sh BUILD: puts the CRIU that install-deps.sh built into
# BUILD/libexec/criu with every library it needs except glibc's own
# (BUILD/lib/criu-deps), and a BUILD/bin/criu wrapper that finds them, so
# a GPU node without CRIU or -dev packages runs this build's CRIU.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=$1
criu=$(command -v criu || echo /usr/local/sbin/criu)
[ -x "$criu" ] || { echo "bundle-criu: no criu found; run 'make deps'" >&2; exit 1; }
mkdir -p "$build/libexec" "$build/lib/criu-deps" "$build/bin"
cp -L "$criu" "$build/libexec/criu"
copy_libs "$build/lib/criu-deps" "$criu"
# The wrapper finds the binary and its libraries relative to itself.
sed -e 's|@LIBEXEC@|$here/../libexec|g' -e 's|@CRIU_DEPS@|$here/../lib/criu-deps|g' \
	-e '/^hwbp_delivered/i here=$(dirname "$(readlink -f "$0")")' "$(dirname "$0")/criu-wrapper.in" >"$build/bin/criu"
chmod +x "$build/bin/criu"
