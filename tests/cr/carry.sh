# carry.sh: a checkpoint carried to another machine, sourced by
# tests/run-tests.sh after cr-tests.sh (whose cr_* helpers it uses).
#
# A checkpoint made on one machine is restored on another: a GPU of
# another model (an H100's snapshot on an H200), or the same machine
# rebuilt. What criu restores must be where it was, so the program runs
# from a fixed folder, $CARRY_RUN (its binary, libcicada.so with the
# libraries it brings, the kernels, its output files); the box is one
# gzipped tar of that folder, criu's images with the GPU snapshot, and
# the program's native output on the first machine.
#
#   cr-carry      both halves on this machine: out, the folder wiped, in
#   cr-carry-out  CICADA_CARRY=DIR: the box, DIR/cicada-carry.tgz
#   cr-carry-in   CICADA_CARRY=DIR: restores the box found there, here
#
# On the device machines: cr-carry-out on the first kind with
# CICADA_CARRY=$OUT, then cr-carry-in on the second with the box carried
# (run's carry). The restored program must print what it printed
# natively on both machines.

CARRY_RUN=/tmp/cicada-carry-run
CARRY_ARGS="4 14 150"                # MiB of device memory, steps, ms a step

# carry_gpu: the name of this machine's first GPU.
carry_gpu() {
	timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n 1 | grep . ||
		echo "the CPU stand-in"
}

# cr_carry_out DIR: runs cr_pattern from $CARRY_RUN through a server of
# its own, dumps it mid-run and packs DIR/cicada-carry.tgz.
cr_carry_out() {
	local box=$1 work=$T/carry-out.$$ p=$((PORT + 60))
	rm -rf "$CARRY_RUN" "$work" && mkdir -p "$CARRY_RUN/lib" "$work" "$box" && box=$(cd "$box" && pwd) || return 1
	cp -a "$B/lib/libcicada.so" "$B/lib/libcuda.so.1" "$B/lib/deps" "$CARRY_RUN/lib/" &&
		cp "$PROGS/cr_pattern" "$CARRY_RUN/" && cp -r "$CICADA_KERNELS" "$CARRY_RUN/kernels" || return 1
	# shellcheck disable=SC2086  # the arguments
	(cd "$CARRY_RUN" && env $DRIVER_ENV timeout 120 ./cr_pattern kernels $CARRY_ARGS) >"$work/native.out" \
		2>"$work/native.err" || { tail -3 "$work/native.err"; return 1; }
	start_server carrya "$p" || return 1
	# (exec: the pid is the program's; the output files are in the folder)
	# shellcheck disable=SC2086
	CICADA_SERVER=unix:$T/carrya.sock LD_LIBRARY_PATH=$CARRY_RUN/lib bash -c \
		'cd "$1" && shift && exec setsid "$@" </dev/null >out 2>err' carry "$CARRY_RUN" ./cr_pattern kernels \
		$CARRY_ARGS &
	CR_PID=$!
	disown $CR_PID
	wait_for "^step 2 " "$CARRY_RUN/out" 60 || return 1
	cr_dump "$work/images" || return 1
	carry_gpu >"$work/gpu"
	kill -9 "${PID_carrya:-}" 2>/dev/null   # (the first machine is gone; start_server set it)
	pkill -9 -f "gpu-server --worker-fd .* --cache-dir $T/cache-carrya" 2>/dev/null
	cp -a "$CARRY_RUN" "$work/run" || return 1
	tar -C "$work" -czf "$box/cicada-carry.tgz" run images native.out gpu || return 1
	echo "     box: $(du -h "$box/cicada-carry.tgz" | cut -f1) (snapshot taken on $(cat "$work/gpu"), pid $CR_PID)"
	rm -rf "$work"
}

# cr_carry_in DIR: puts the box's folder back at $CARRY_RUN and restores
# its images into a new server; the program ends with the output of an
# uninterrupted run, the native one of the first machine and of this one.
cr_carry_in() {
	local box=$1/cicada-carry.tgz work=$T/carry-in p=$((PORT + 62)) here
	[ -s "$box" ] || { echo "     no box at $box (make one with cr-carry-out)"; return 1; }
	box=$(cd "$(dirname "$box")" && pwd)/cicada-carry.tgz
	rm -rf "$work" "$CARRY_RUN" && mkdir -p "$work" || return 1
	tar -C "$work" -xzf "$box" || return 1
	cp -a "$work/run" "$CARRY_RUN" || return 1
	# shellcheck disable=SC2086
	(cd "$CARRY_RUN" && env $DRIVER_ENV timeout 120 ./cr_pattern kernels $CARRY_ARGS) >"$work/native.here" \
		2>/dev/null || return 1
	cmp -s "$work/native.out" "$work/native.here" || { echo "     the native runs of the two machines differ"; return 1; }
	start_server carryb "$p" || return 1
	cr_restore "$work/images" CICADA_RESTORE_SERVER="unix:$T/carryb.sock" || return 1
	CR_PID=$(ls "$work/images" | sed -n 's/^cicada-gpu-\([0-9]*\)$/\1/p' | head -n 1)
	here=$(carry_gpu)
	echo "     snapshot taken on $(cat "$work/gpu"), restored on $here"
	CR_OUT=$CARRY_RUN/out CR_REF=$work/native.out cr_finished && grep -q "restored snapshot" "$T/carryb.log"
}

# cr_carry_both: both halves here, the folder wiped in between.
cr_carry_both() {
	cr_carry_out "$T/carry-box" || return 1
	rm -rf "$CARRY_RUN"
	cr_carry_in "$T/carry-box"
}

run_carry_tests() {
	want cr-carry || want cr-carry-out || want cr-carry-in || return
	deadline 60 "$CRIU" check >/dev/null 2>&1 || return      # (run_cr_tests says so)
	want cr-carry && cr_case "a checkpoint packed as one box, its folder wiped, restored from the box: output identical" \
		"$T/carry-in/images" cr_carry_both
	if [ -z "${CICADA_CARRY:-}" ]; then
		[ ${#SELECT[@]} -gt 0 ] && { want cr-carry-out || want cr-carry-in; } &&
			echo "note cr-carry-out, cr-carry-in: not run (they need CICADA_CARRY=DIR)"
		[ -n "${KEEP_T:-}" ] || rm -rf "$CARRY_RUN"
		return
	fi
	want cr-carry-out && cr_case "a checkpoint boxed to carry to another machine ($CICADA_CARRY)" \
		"$T/carry-out.$$/images" cr_carry_out "$CICADA_CARRY"
	want cr-carry-in && cr_case "a checkpoint carried from another machine, restored here: output identical to native on both" \
		"$T/carry-in/images" cr_carry_in "$CICADA_CARRY"
	[ -n "${KEEP_T:-}" ] || rm -rf "$CARRY_RUN"
}
