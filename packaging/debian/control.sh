#!/usr/bin/env bash
# control.sh DEB_DIR VERSION ARCH CUDA_STUBS: prints the package's
# DEBIAN/control. Depends comes from dpkg-shlibdeps over the staged
# binaries; libcuda.so.1, the driver's (the gpu-server links it), comes
# with NVIDIA's driver, not from a Debian package, so it is left out.
set -euo pipefail
dir=$1 version=$2 arch=$3 stubs=$4
root=$(cd "$dir/root" && pwd)
work=$dir/shlibdeps
rm -rf "$work" && mkdir -p "$work/debian"
printf 'Source: cicada\n\nPackage: cicada\nArchitecture: any\n' >"$work/debian/control"
# The bundled CRIU brings its own libraries (usr/lib/cicada/criu-deps):
# neither it nor they add to Depends.
bins=$(cd "$root" && find usr -type f \( -perm -u+x -o -name '*.so*' \) \
	! -path 'usr/lib/cicada/criu-deps/*' ! -path 'usr/libexec/cicada/criu' ! -name cicada-criu ! -name cicada-slurm \
	| sed "s|^|$root/|")
# shellcheck disable=SC2086
deps=$(cd "$work" && dpkg-shlibdeps -O --ignore-missing-info -l"$stubs" -l"$root/usr/lib/cicada" \
	-xlibcuda1 $bins | sed -n "s/^shlibs:Depends=//p")
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat <<CONTROL
Package: cicada
Version: $version
Architecture: $arch
Maintainer: Cicada developers <cicada@localhost>
Installed-Size: $size
Depends: $deps, adduser
Section: utils
Priority: optional
Description: remote, checkpointable and movable GPUs for unmodified CUDA programs
 Cicada puts a drop-in libcuda.so.1 between a CUDA program and the
 driver: every driver call goes to a gpu-server on the same node or on
 another one. The program's GPU state can then be checkpointed and
 restored with CRIU, moved to another node with gpu-migrate, and the
 node's GPUs shared among tenants whose workers run as their own users.
 .
 This package holds gpu-server (with a systemd unit), gpu-migrate,
 gpu-template (copies of a warmed-up program, started from a template),
 cicadactl (the operator's view of the sessions: quotas, moves, drains),
 gpu-snapshot, the client libraries in /usr/lib/cicada (kept off the
 system's library path: point LD_LIBRARY_PATH there), the CRIU
 plugin in /usr/lib/criu, and cicada-criu: CRIU 4 with the project's
 patches and its own libraries, which gpu-server and gpu-migrate run.
CONTROL
