#!/usr/bin/env bash
# prepare.sh HECBENCH_GIT OUT: copies the source folder of every program in
# programs.txt, at the pinned commit, out of a HeCBench git directory (as
# the search tool's fetch brings it) into OUT, which the device tool then
# carries. Nothing of it is committed (OUT should be ignored by git).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
git_dir=$1 out=$2
commit=$(awk '$1 == "commit" { print $2 }' "$here/programs.txt")
mkdir -p "$out"
grep -v '^#' "$here/programs.txt" | awk '$1 != "commit" && NF { print $1 }' | while read -r name; do
	rm -rf "${out:?}/$name-cuda"
	# (git names unrelated missing large objects of the snapshot on stderr)
	git --git-dir="$git_dir" archive "$commit" "src/$name-cuda" 2>/dev/null | tar -x -C "$out" --strip-components=1
	[ -f "$out/$name-cuda/Makefile" ] || { echo "prepare: $name is not at $commit" >&2; exit 1; }
done
echo "prepare: $(ls "$out" | wc -l) programs in $out ($(du -sh "$out" | cut -f1))"
