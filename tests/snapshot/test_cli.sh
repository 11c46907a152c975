#!/usr/bin/env bash
# test_cli.sh [BUILD]: tests of the gpu-snapshot tool on the sample
# snapshot that test_snapshot writes: inspect (text and JSON, the owner
# included), verify (saying what it checked), verify of a corrupted copy
# (one error line, exit 1), keyed snapshots with and without the key
# (--no-key), symbolic links where a snapshot or its file should be, a
# parent of another owner or missing (the same words), and usage errors.
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
       grep -q "cuModuleLoadData" <<<"$out" && grep -q "^images  *2," <<<"$out" &&
       grep -q "^owner  *uid 1000 (uid 1000)$" <<<"$out"'
expect inspect 0 "$TOOL" inspect "$T"
expect inspect_snapshot_dir 0 "$TOOL" inspect "$T/cicada-gpu"

CHECK='python3 -c "import json, sys; d = json.load(sys.stdin)
assert d[\"pieces\"][\"count\"] == 6 and len(d[\"records\"]) == 3 and len(d[\"images\"]) == 2
assert d[\"gpu\"][\"name\"] == \"Fake GPU \\\"H100\\\"\"
assert d[\"owner\"] == \"uid 1000\" and d[\"owner_uid\"] == 1000" <<<"$out"'
expect inspect_json_fields 0 "$TOOL" inspect "$T" --json
CHECK='"$TOOL" inspect "$T" --json | python3 -m json.tool >/dev/null'
expect inspect_json_tool 0 true

CHECK='[[ "$out" =~ ^OK:\ checksums\ checked\;\ the\ snapshot\ has\ no\ codes\ \(not\ keyed\):\ 6\ pieces,\ 2\ images,\ [0-9]+\ bytes\ verified$ ]]'
expect verify 0 "$TOOL" verify "$T"
expect verify_no_key_unkeyed 0 "$TOOL" verify "$T" --no-key

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

# keyed: codes checked under the key; without it an error, unless --no-key
printf 'the cluster secret of 32 bytes..' >"$T/key"
mkdir "$T/keyed"
if ! CICADA_SNAPSHOT_KEY_FILE=$T/key "$B/tests/snapshot/test_snapshot" sample "$T/keyed"; then
	fail keyed_sample "cannot write a keyed sample"
fi
CHECK='[[ "$out" =~ ^OK:\ checksums\ and\ codes\ checked\ under\ the\ key:\ 6\ pieces ]]'
expect verify_keyed_with_key 0 env CICADA_SNAPSHOT_KEY_FILE="$T/key" "$TOOL" verify "$T/keyed"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "carries codes of a key, but no key was given" <<<"$out"'
expect verify_keyed_without_key 1 "$TOOL" verify "$T/keyed"
CHECK='[[ "$out" =~ ^checksums\ OK\;\ codes\ NOT\ checked:\ no\ key\ given:\ 6\ pieces ]]'
expect verify_keyed_no_key 0 "$TOOL" verify "$T/keyed" --no-key
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "carries no code" <<<"$out"'
expect verify_unkeyed_with_key 1 env CICADA_SNAPSHOT_KEY_FILE="$T/key" "$TOOL" verify "$T"

# the owner is under the manifest's code: changed, the snapshot is refused
cp -r "$T/keyed" "$T/owner-forged"
"$B/tests/snapshot/test_snapshot" reseal-owner "$T/owner-forged/cicada-gpu" || fail owner_forged "cannot reseal"
CHECK='grep -q "^owner  *uid 0 (uid 0)$" <<<"$out"'
expect inspect_owner_forged 0 "$TOOL" inspect "$T/owner-forged"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "does not match this server.s key" <<<"$out"'
expect verify_owner_forged 1 env CICADA_SNAPSHOT_KEY_FILE="$T/key" "$TOOL" verify "$T/owner-forged"

# symbolic links where a snapshot or one of its files should be
mkdir "$T/links"
ln -s "$T/cicada-gpu" "$T/links/cicada-gpu"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "snapshot cicada-gpu: is a symbolic link; refused" <<<"$out"'
expect verify_snapshot_symlink 1 "$TOOL" verify "$T/links"
expect inspect_snapshot_symlink 1 "$TOOL" inspect "$T/links"
cp -r "$T/cicada-gpu" "$T/datalink"
mv "$T/datalink/device-memory.img" "$T/datalink/data.real"
ln -s data.real "$T/datalink/device-memory.img"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "device-memory.img: is a symbolic link; refused" <<<"$out"'
expect verify_data_symlink 1 "$TOOL" verify "$T/datalink"
cp -r "$T/cicada-gpu" "$T/manifestlink"
mv "$T/manifestlink/manifest" "$T/manifestlink/manifest.real"
ln -s manifest.real "$T/manifestlink/manifest"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "manifest: is a symbolic link; refused" <<<"$out"'
expect verify_manifest_symlink 1 "$TOOL" verify "$T/manifestlink"

# an incremental snapshot whose parent is another owner's, or gone: the
# same one line, which tells nothing of what exists
mkdir "$T/chain"
"$B/tests/snapshot/test_snapshot" chain "$T/chain" || fail chain "cannot write the chain"
CHECK='grep -q "^parent  *../../base/cicada-gpu " <<<"$out"'
expect inspect_chain 0 "$TOOL" inspect "$T/chain/incr"
CHECK='[[ "$out" =~ ^OK: ]]'
expect verify_chain 0 "$TOOL" verify "$T/chain/incr"
PARENT_REFUSED="its parent snapshot ../../base/cicada-gpu cannot be used (missing, changed, or not the owner's)"
chown 65534:65534 "$T/chain/base/cicada-gpu"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -qF "$PARENT_REFUSED" <<<"$out"'
expect verify_parent_other_owner 1 "$TOOL" verify "$T/chain/incr"
other=$out
chown 0:0 "$T/chain/base/cicada-gpu"
mv "$T/chain/base" "$T/chain/base.away"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -qF "$PARENT_REFUSED" <<<"$out" && [ "$out" = "$other" ]'
expect verify_parent_missing 1 "$TOOL" verify "$T/chain/incr"

mkdir "$T/empty"
CHECK='[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "no Cicada GPU snapshot here" <<<"$out"'
expect inspect_not_a_snapshot 1 "$TOOL" inspect "$T/empty"

CHECK='grep -q "^usage: gpu-snapshot inspect DIR" <<<"$out" && grep -q "verify DIR \[--no-key\]" <<<"$out"'
expect help 0 "$TOOL" --help
expect unknown_command 2 "$TOOL" frobnicate "$T"
expect missing_dir 2 "$TOOL" verify
expect unknown_option 2 "$TOOL" verify "$T" --frobnicate

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
