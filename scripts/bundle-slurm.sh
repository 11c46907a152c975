#!/usr/bin/env bash
# bundle-slurm.sh [BUILD]: Debian's Slurm and munge, as installed here
# (scripts/install-deps.sh), copied into BUILD/slurm-root with every
# library they load that is not glibc's, for a GPU node without Slurm
# (no apt, no internet): tests/slurm/gpu-check.sh and the suite's slurm
# test use it there (SLURM_ROOT). About 15 MB.
#
#   bin/    srun sbatch salloc scontrol squeue sinfo scancel munge unmunge
#   sbin/   slurmctld slurmd slurmstepd munged
#   libexec/  the programs themselves; bin/ and sbin/ hold wrappers that
#           set LD_LIBRARY_PATH (slurmd runs slurmstepd for the job's
#           prolog and epilog with the job's environment, which has none)
#   lib/    the libraries; lib/slurm-wlm/ the plugins (PluginDir)
#
# Slurm then needs only a slurm.conf naming PluginDir, and slurmd -d
# naming sbin/slurmstepd (tests/slurm/cluster.sh writes both).
set -euo pipefail

B=${1:-build}
R=$B/slurm-root
PLUGINS=/usr/lib/x86_64-linux-gnu/slurm-wlm
BIN="srun sbatch salloc scontrol squeue sinfo scancel munge unmunge"
SBIN="slurmctld slurmd slurmstepd munged"
# glibc's own, which every node has
SYSTEM='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64)\.so'

for p in $BIN $SBIN; do
	command -v "$p" >/dev/null || { echo "bundle-slurm: no $p here: run scripts/install-deps.sh" >&2; exit 1; }
done
[ -d "$PLUGINS" ] || { echo "bundle-slurm: no $PLUGINS" >&2; exit 1; }
rm -rf "$R"
mkdir -p "$R/bin" "$R/sbin" "$R/libexec" "$R/lib/slurm-wlm"

# wrapper NAME DIR: DIR/NAME runs libexec/NAME with the bundle's libraries
wrapper() {
	cat >"$R/$2/$1" <<-'EOF'
		#!/bin/sh
		r=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
		LD_LIBRARY_PATH=$r/lib:$r/lib/slurm-wlm${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$r/libexec/$(basename "$0")" "$@"
	EOF
	chmod 755 "$R/$2/$1"
}
for p in $BIN; do cp "$(readlink -f "$(command -v "$p")")" "$R/libexec/$p"; wrapper "$p" bin; done
for p in $SBIN; do cp "$(readlink -f "$(command -v "$p")")" "$R/libexec/$p"; wrapper "$p" sbin; done
# the plugins, but the REST API's and PMI's (not used here, and large)
for f in "$PLUGINS"/*.so; do
	case ${f##*/} in openapi_* | libslurm_pmi.so | mpi_pmix*) continue ;; esac
	cp "$f" "$R/lib/slurm-wlm/"
done
# every library those load that glibc does not provide
for f in "$R"/libexec/* "$R"/lib/slurm-wlm/*.so; do
	LD_LIBRARY_PATH=$PLUGINS ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
	[[ $name =~ $SYSTEM ]] && continue
	[ -e "$R/lib/slurm-wlm/$name" ] || cp -L "$path" "$R/lib/$name"
done
echo "bundle-slurm: $(du -sh "$R" | cut -f1) in $R ($(ls "$R/lib" | wc -l) libraries, $(ls "$R/lib/slurm-wlm" | wc -l) plugins)"
