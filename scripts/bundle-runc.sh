#!/usr/bin/env bash
# bundle-runc.sh BUILD: puts this machine's runc into BUILD/libexec/runc
# with the libraries it needs except glibc's own (BUILD/lib/runc-deps:
# Debian's links libseccomp), and a BUILD/bin/runc wrapper that finds
# them, so that a GPU node without runc runs the container test
# (tests/containers/run.sh). Nothing is done where there is no runc.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
build=$1
runc=$(command -v runc || true)
[ -n "$runc" ] || { echo "bundle-runc: no runc here (make deps installs it); not bundled"; exit 0; }
mkdir -p "$build/libexec" "$build/lib/runc-deps" "$build/bin"
cp -L "$runc" "$build/libexec/runc"
copy_libs "$build/lib/runc-deps" "$runc"
# (runc's environment is not the container's: config.json gives that)
cat >"$build/bin/runc" <<'EOF'
#!/bin/sh
# runc, as bundled by Cicada (scripts/bundle-runc.sh) for nodes without one.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib/runc-deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/../libexec/runc" "$@"
EOF
chmod +x "$build/bin/runc"
