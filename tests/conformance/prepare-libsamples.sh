#!/usr/bin/env bash
# prepare-libsamples.sh SAMPLES_GIT OUT [LIST]: copies the folder of every
# sample in libsamples.txt (or LIST), with the shared helper folders of its
# library (cmake/, utils/, Common/), at the pinned commit, out of a
# CUDALibrarySamples git directory (as the search tool's fetch brings it)
# into OUT/src, builds each folder once with CMake (Release, sm_90) in
# OUT/build, and leaves each sample's executable at OUT/bin/NAME, which
# is where run.sh (CONFORMANCE_LIST=libsamples) looks. Needs nvcc and
# cmake, not a GPU. Prints a line per sample ("NAME built" or "NAME build
# failed", also in OUT/builds.txt; build logs in OUT/build/DIR.log) and a
# summary. Nothing of it is committed (OUT should be outside the repo or
# ignored). Only OUT/bin is needed to run: the rest may be left behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
git_dir=$1 out=$2 list=${3:-$here/libsamples.txt}
commit=$(awk '$1 == "commit" { print $2 }' "$list")
JOBS=${PREPARE_JOBS:-$(nproc)}
# (the cuSPARSE samples link cudart and cusparse by bare name with the C
# compiler, which looks in LIBRARY_PATH)
export LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}
mkdir -p "$out/src" "$out/build" "$out/bin"
out=$(cd "$out" && pwd)
samples() { grep -v '^#' "$list" | awk '$1 != "commit" && NF'; }

# extract DIR: DIR and its library's helper folders, into OUT/src.
extract() {
	local dir=$1 lib=${1%%/*} paths=$1 h
	for h in cmake utils Common; do
		git --git-dir="$git_dir" cat-file -e "$commit:$lib/$h" 2>/dev/null && paths="$paths $lib/$h"
	done
	# (git names unrelated missing large objects of the snapshot on stderr)
	git --git-dir="$git_dir" archive "$commit" $paths 2>/dev/null | tar -x -C "$out/src"
	[ -f "$out/src/$dir/CMakeLists.txt" ] || { echo "prepare: $dir is not at $commit" >&2; exit 1; }
}

# build_dir DIR: configures DIR and builds the executables its samples
# name; each run of cmake has a deadline.
build_dir() {
	local dir=$1 b=$out/build/$1 targets
	targets=$(samples | awk -v d="$dir" '$2 == d { print $3 }' | sort -u)
	{ timeout -k 5 300 cmake -S "$out/src/$dir" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
	  timeout -k 5 900 cmake --build "$b" -j2 --target $targets; } >"$b.log" 2>&1 || true
}

# place NAME DIR EXE: copies the built EXE to OUT/bin/NAME; its verdict line.
place() {
	local name=$1 dir=$2 exe=$3 f
	f=$(find "$out/build/$dir" -name "$exe" -type f -perm -u+x 2>/dev/null | head -1)
	rm -f "$out/bin/$name"
	[ -n "$f" ] && cp "$f" "$out/bin/$name" && echo "$name built" || echo "$name build failed"
}
export -f build_dir samples
export out list

for d in $(samples | awk '{ print $2 }' | sort -u); do extract "$d"; done
samples | awk '{ print $2 }' | sort -u | while read -r d; do mkdir -p "$(dirname "$out/build/$d")"; echo "$d"; done |
	xargs -P "$JOBS" -I{} bash -c 'build_dir {}'
samples | while read -r name dir exe _; do place "$name" "$dir" "$exe"; done | tee "$out/builds.txt"
echo "prepare: $(grep -c ' built$' "$out/builds.txt") of $(samples | wc -l) samples built in $out/bin ($(du -sh "$out/bin" | cut -f1))"
