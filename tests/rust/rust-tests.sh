# rust-tests.sh: the Rust client (clients/rust), sourced by
# tests/run-tests.sh (which defines ok/bad/check, cicada_env, start_server,
# the cr_* helpers, $T, $B, $PORT and $DRIVER_ENV). One test, rust:
#  - cargo test of both crates (Debian's cargo, offline; CPU mode only: a
#    GPU node has no cargo): each test starts its own servers on the
#    stand-in; the examples, the API and every error path over unix and
#    TCP, and sessions over TLS;
#  - the examples built by make (build/rust/bin) against this suite's
#    server, over unix and TCP, in both modes;
#  - no_driver in a mount namespace whose /dev is empty, with no libcuda;
#  - a Rust program checkpointed by CRIU and Cicada's plugin through its
#    control socket, its server killed, restored into a new server: its
#    output is that of a run never interrupted.

RUST_BIN=$B/rust/bin
# Debian's toolchain (rustc 1.63), as make uses it
RUST_CARGO=$(command -v /usr/bin/cargo || command -v cargo)
rust_env() {
	echo "CARGO_TARGET_DIR=$B/rust/target CARGO_NET_OFFLINE=true CICADA_BUILD=$B CUDA=${CUDA:-/usr/local/cuda}" \
		"RUSTC=$(command -v /usr/bin/rustc || command -v rustc) RUSTDOC=$(command -v /usr/bin/rustdoc || command -v rustdoc)"
}

# rust_cargo_test CRATE: its cargo tests pass; says how many ran.
rust_cargo_test() {
	local crate=$1 log=$T/rust-cargo-$1.log n
	(cd "clients/rust/$crate" && deadline 240 env $(rust_env) "$RUST_CARGO" test --offline --release) >"$log" 2>&1
	local rc=$?
	n=$(awk '/^test result: ok\./ { s += $4 } END { print s + 0 }' "$log")
	if [ $rc -eq 0 ] && [ "$n" -gt 0 ] && ! grep -q "^test result: FAILED" "$log"; then
		ok "rust: cargo test of $crate ($n tests: $2)"
	else
		bad "rust: cargo test of $crate (exit $rc)"
		grep -E "^test .* FAILED|panicked|^error" "$log" | head -8
	fi
}

# rust_example TRANSPORT NAME ARGS...: a prebuilt example against the main server.
rust_example() {
	local tr=$1 name=$2 out
	shift 2
	out=$T/rust-$name.$tr
	deadline 120 env $(cicada_env "$tr") CICADA_RUST_KERNELS="$B/rust/kernels" "$RUST_BIN/$name" "$@" \
		>"$out" 2>"$out.err"
	local rc=$?
	if [ $rc -eq 0 ] && grep -q "PASS" "$out"; then
		ok "rust: $name $* over $tr: $(grep -o 'PASS' "$out" | head -1)"
	else
		bad "rust: $name $* over $tr (exit $rc)"; tail -3 "$out" "$out.err"
	fi
}

# no_driver where there is none: a mount namespace with an empty /dev,
# an environment without LD_LIBRARY_PATH; it checks its own maps.
rust_no_driver() {
	local out=$T/rust-nodriver
	if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
		ok "rust: no_driver in an empty /dev: not root or no unshare here (skipped)"
		return
	fi
	deadline 60 unshare --mount --propagation private sh -c \
		"mount -t tmpfs none /dev && exec env -i CICADA_SERVER=unix:$T/main.sock \
		 CICADA_RUST_KERNELS=$B/rust/kernels '$RUST_BIN/no_driver'" >"$out" 2>"$out.err"
	local rc=$?
	if [ $rc -eq 0 ] && grep -q "no /dev/nvidia\*, no libcuda" "$out" && grep -q "remote GPU: PASS" "$out"; then
		ok "rust: no_driver in a namespace with an empty /dev and no libcuda: the remote GPU's kernel runs"
	else
		bad "rust: no_driver in an empty /dev (exit $rc)"; tail -3 "$out" "$out.err"
	fi
}

# A Rust program checkpointed mid-run, its server killed, restored into
# another server (cr_server_killed): output identical to an unbroken run.
rust_cr() {
	local ref=$T/rust-steps.ref dir=$T/ckpt.rust
	if ! deadline 60 "$CRIU" check >/dev/null 2>&1; then
		bad "rust: criu check fails here ($CRIU); the checkpoint of a Rust program is not tested"
		return
	fi
	deadline 120 env $(cicada_env unix) CICADA_RUST_KERNELS="$B/rust/kernels" "$RUST_BIN/steps" 10 150 >"$ref" 2>&1 ||
		{ bad "rust: steps, uninterrupted (exit $?)"; tail -3 "$ref"; return; }
	grep -q "^done" "$ref" || { bad "rust: steps did not finish"; return; }
	export CICADA_RUST_KERNELS=$B/rust/kernels
	if CR_REF=$ref CR_TAG=rust CR_PORTS=92 cr_server_killed "$RUST_BIN/steps" 10 150; then
		ok "rust: a Rust program checkpointed by CRIU through its control socket, its server killed, restored into a new server: output identical"
	else
		bad "rust: a Rust program checkpointed, its server killed, restored into a new server"
		CR_REF=$ref cr_show_failure "$dir"
	fi
	unset CICADA_RUST_KERNELS
}

# The Rust code comes from the table: a procedure added to calls.tbl gets
# its number and a typed stub with no other edit.
rust_generated() {
	local tbl=$T/rust-calls.tbl out=$T/rust-proto.rs
	{ cat wire/calls.tbl; echo "999 cuRustCheck sync+cache int *value, CUdevice dev, unsigned int flags"; } >"$tbl"
	deadline 60 python3 wire/gen-calls.py --cc "${CC:-cc}" --include "$CUDA_INCLUDE" rust "$tbl" wire/cicada.x >"$out" &&
		grep -q "pub const P_cuRustCheck: u32 = 999;" "$out" &&
		grep -q "fn cuRustCheck(&mut self, dev: i32, flags: u32) -> Result<i32, Error>" "$out" &&
		grep -q "999 => \"cuRustCheck\"" "$out"
}

run_rust_tests() {
	want rust || return
	if [ ! -x "$RUST_BIN/steps" ]; then
		if [ -z "$RUST_CARGO" ]; then
			echo "skip rust: no cargo here (scripts/install-deps.sh installs Debian's cargo and rustc)"
		else
			bad "rust: $RUST_BIN is missing; run make"
		fi
		return
	fi
	if [ "$MODE" = cpu ] && [ -n "$RUST_CARGO" ]; then
		rust_cargo_test cicada "examples, API, raw calls, token, server death, bad PTX, out-of-range copies; unix and TCP"
		rust_cargo_test cicada-tls "sessions over TLS, untrusted certificate, plain TCP at the TLS port, wrong token, mutual TLS"
	fi
	check "rust: a procedure added to calls.tbl appears in the generated Rust (number, name, typed stub)" rust_generated
	rust_example tcp vector_add 1000000
	for f in ptx cubin fatbin; do rust_example unix matmul 128 "$f" 2; done
	rust_no_driver
	rust_cr
}
