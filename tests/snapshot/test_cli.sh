#!/usr/bin/env bash
# test_cli.sh [BUILD]: tests of the gpu-snapshot tool on the sample
# snapshot that test_snapshot writes: inspect (text and JSON), verify,
# verify of a corrupted copy (one error line, exit 1), and usage errors.
# Prints "PASS name" or "FAIL name: reason" per case, then
# "N passed, M failed"; exits nonzero on failure.
set -u
B=${1:-build}
TOOL=$B/bin/gpu-snapshot
T=$(mktemp -d /tmp/cicada-snapcli.XXXXXX)
trap 'rm -rf "$T"' EXIT
PASS=0
FAIL=0

pass() { PASS=$((PASS + 1)); echo "PASS $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $(head -c 300 <<<"$2" | tr '\n' '|')"; }
# expect NAME RC COMMAND...: runs COMMAND, saves its output in $out,
# passes if it exits with RC and the check in $CHECK (a shell test) holds.
expect() {
	local name=$1 want=$2 rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ]; then fail "$name" "exit $rc, expected $want: $out"
	elif ! eval "$CHECK"; then fail "$name" "$out"
	else pass "$name"; fi
}

if ! "$B/tests/snapshot/test_snapshot" sample "$T"; then
	echo "FAIL sample: cannot write the sample snapshot"
	echo "0 passed, 1 failed"
	exit 1
fi

CHECK='grep -q "^format version   2$" <<<"$out" && grep -q "^pieces  *6 " <<<"$out" &&
       grep -q "cuModuleLoadData" <<<"$out" && grep -q "^images  *2," <<<"$out"'
expect inspect 0 "$TOOL" inspect "$T"
expect inspect_snapshot_dir 0 "$TOOL" inspect "$T/cicada-gpu"

CHECK='python3 -c "import json, sys; d = json.load(sys.stdin)
assert d[\"pieces\"][\"count\"] == 6 and len(d[\"records\"]) == 3 and len(d[\"images\"]) == 2
assert d[\"gpu\"][\"name\"] == \"Fake GPU \\\"H100\\\"\"" <<<"$out"'
expect inspect_json_fields 0 "$TOOL" inspect "$T" --json
CHECK='"$TOOL" inspect "$T" --json | python3 -m json.tool >/dev/null'
expect inspect_json_tool 0 true

CHECK='[[ "$out" =~ ^OK:\ 6\ pieces,\ 2\ images,\ [0-9]+\ bytes\ verified$ ]]'
expect verify 0 "$TOOL" verify "$T"

cp -r "$T/cicada-gpu" "$T/copy"
python3 - "$T/copy" <<'EOF'
import glob, os, sys
path = max(glob.glob(sys.argv[1] + "/device-memory*.img"), key=os.path.getsize)
with open(path, "r+b") as f:
    f.seek(os.path.getsize(path) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x5a]))
EOF
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "device memory piece at 0x7f00[0-9a-f]* ([0-9.]* [KM]iB): " <<<"$out"'
expect verify_corrupted 1 "$TOOL" verify "$T/copy"

mkdir "$T/empty"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "no Cicada GPU snapshot here" <<<"$out"'
expect inspect_not_a_snapshot 1 "$TOOL" inspect "$T/empty"

CHECK='grep -q "^usage: gpu-snapshot inspect DIR" <<<"$out"'
expect help 0 "$TOOL" --help
expect unknown_command 2 "$TOOL" frobnicate "$T"
expect missing_dir 2 "$TOOL" verify

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
