# cluster.sh: a Slurm cluster on one machine for Cicada's tests, sourced
# by tests/slurm/slurm-tests.sh (the CPU suite) and tests/slurm/gpu-check.sh.
# Debian's Slurm (or the copy scripts/bundle-slurm.sh carries under
# build/slurm-root: SLURM_ROOT) with a configuration made here: munged,
# slurmctld on a bridge, and one slurmd a node, each node a network
# namespace with its own gpu-server (the CPU stand-in, or a GPU). No
# systemd, no cgroups: proctrack/linuxproc, task/none. Every daemon runs
# in the foreground under a deadline (SLURM_DEADLINE s), and
# slurm_cluster_down ends them by their pids and removes the namespaces.
#
# Needs B (the build), DRIVER_ENV (the servers' driver), SL (an empty
# folder of its own). After slurm_cluster_up NODE[:SERVER-OPTIONS]...:
# SLURM_CONF (exported), SL_ADDR_<node> (its server's TCP address),
# SL_NS_<node> (nsenter's arguments for the node), sl_ctl NODE ARGS
# (cicadactl on the node's server), and the Slurm commands on PATH.

SLURM_DEADLINE=${SLURM_DEADLINE:-300}
SL_PIDS=""
SL_NODES=""
SL_NETNS=""
SL_NET=10.$((40 + $$ % 50))
SL_BR=cslbr$$

# sl_bg LOG CMD...: CMD in the background under the deadline, its pid noted.
sl_bg() {
	local log=$1
	shift
	timeout -k 5 "$SLURM_DEADLINE" "$@" >>"$log" 2>&1 </dev/null &
	SL_PIDS="$SL_PIDS $!"
	disown $!
}

# The Slurm programs: Debian's, or SLURM_ROOT's (wrappers that set their
# libraries' path: scripts/bundle-slurm.sh).
sl_programs() {
	if [ -n "${SLURM_ROOT:-}" ]; then
		export PATH=$SLURM_ROOT/bin:$SLURM_ROOT/sbin:$PATH
		SL_PLUGINS=$SLURM_ROOT/lib/slurm-wlm
		SL_STEPD=$SLURM_ROOT/sbin/slurmstepd
	else
		SL_PLUGINS=""
		SL_STEPD=""
	fi
	for p in munged slurmctld slurmd srun sbatch scontrol squeue sinfo scancel; do
		command -v "$p" >/dev/null || { echo "cluster: no $p (install Debian's slurm-wlm and munge, or set SLURM_ROOT)"; return 1; }
	done
}

# sl_conf NODE...: slurm.conf, gres.conf, plugstack.conf, cli_filter.lua and
# the servers file, in $SL/etc. Each node has SL_GRES GRES cicada (local
# jobs) and a licence cicada@NODE of SL_LICENCES (remote jobs).
sl_conf() {
	local n i=0 licences=""
	mkdir -p "$SL/etc" "$SL/state-ctld" "$SL/log" "$SL/ckpt" "$SL/tokens" "$SL/state"
	chmod 700 "$SL/tokens" "$SL/ckpt"
	for n in "$@"; do licences="$licences${licences:+,}cicada@${n%%:*}:${SL_LICENCES:-1}"; done
	cat >"$SL/etc/slurm.conf" <<-EOF
		ClusterName=cicada
		SlurmctldHost=$(hostname -s)($SL_NET.0.1)
		SlurmUser=root
		SlurmdUser=root
		SlurmctldPort=$((16000 + $$ % 2000))
		SlurmdPort=$((18000 + $$ % 2000))
		AuthType=auth/munge
		AuthInfo=socket=$SL/munge.sock
		CredType=cred/munge
		StateSaveLocation=$SL/state-ctld
		SlurmdSpoolDir=$SL/spool/%n
		SlurmctldPidFile=$SL/slurmctld.pid
		SlurmdPidFile=$SL/slurmd-%n.pid
		SlurmctldLogFile=$SL/log/slurmctld.log
		SlurmdLogFile=$SL/log/slurmd-%n.log
		SlurmdDebug=verbose
		${SL_PLUGINS:+PluginDir=$SL_PLUGINS}
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		JobAcctGatherType=jobacct_gather/none
		AccountingStorageType=accounting_storage/none
		SwitchType=switch/none
		MpiDefault=none
		MailProg=/bin/true
		SchedulerType=sched/builtin
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core
		ReturnToService=2
		SlurmdParameters=config_overrides
		MessageTimeout=20
		KillWait=5
		GresTypes=cicada
		Licenses=$licences
		PlugStackConfig=$SL/etc/plugstack.conf
		CliFilterPlugins=cli_filter/lua
		JobRequeue=1
	EOF
	for n in "$@"; do
		i=$((i + 1))
		echo "NodeName=${n%%:*} NodeAddr=$SL_NET.0.$((i + 1)) CPUs=2 RealMemory=1000 Gres=cicada:${SL_GRES:-1} State=UNKNOWN" \
			>>"$SL/etc/slurm.conf"
		echo "${n%%:*} tcp:$SL_NET.0.$((i + 1)):7777" >>"$SL/servers"
		SL_NODES="$SL_NODES ${n%%:*}"
		mkdir -p "$SL/spool/${n%%:*}"
	done
	echo "PartitionName=main Nodes=$(echo $SL_NODES | tr ' ' ',') Default=YES MaxTime=30 State=UP" >>"$SL/etc/slurm.conf"
	echo "Name=cicada Count=${SL_GRES:-1}" >"$SL/etc/gres.conf"
	# No cgroups are used (proctrack/linuxproc, task/none), but slurmd
	# loads a cgroup plugin all the same; autodetected on a cgroup v2
	# host without systemd, it fails for want of dbus. The v1 plugin
	# only loads.
	echo "CgroupPlugin=cgroup/v1" >"$SL/etc/cgroup.conf"
	echo "required $B/lib/slurm/cicada.so lib=$B/lib socket=unix:$SL/%n.sock servers=$SL/servers" \
		"tokens=$SL/tokens state=$SL/state checkpoints=$SL/ckpt criu=$B/bin/criu plugins=$B/lib/criu" \
		"migration-token=$SL/mtoken" >"$SL/etc/plugstack.conf"
	cp "$B/lib/slurm/cli_filter.lua" "$SL/etc/cli_filter.lua"
	head -c 24 /dev/urandom | base64 >"$SL/mtoken"
	export SLURM_CONF=$SL/etc/slurm.conf
}

# sl_node NAME I SERVER-OPTIONS: node NAME's namespace on the bridge, its
# gpu-server (unix $SL/NAME.sock, tcp :7777, the jobs' tokens) and slurmd.
sl_node() {
	local name=$1 i=$2 ns=cicada-sl$2-$$ ip=$SL_NET.0.$(($2 + 1))
	shift 2
	ip netns add "$ns" && SL_NETNS="$SL_NETNS $ns" && ip -n "$ns" link set lo up &&
		ip link add "vsl$i$$" type veth peer name eth0 netns "$ns" && ip link set "vsl$i$$" master "$SL_BR" up &&
		ip -n "$ns" addr add "$ip/24" dev eth0 && ip -n "$ns" link set eth0 up || return 1
	eval "SL_NS_$name='--net=/run/netns/$ns' SL_ADDR_$name=tcp:$ip:7777"
	# shellcheck disable=SC2086  # the driver's variables, the options' words
	sl_bg "$SL/server-$name.log" nsenter --net="/run/netns/$ns" env $DRIVER_ENV "$B/bin/gpu-server" \
		--listen "unix:$SL/$name.sock" --listen "tcp:$ip:7777" --token-dir "$SL/tokens" \
		--migration-token-file "$SL/mtoken" --accept-migrations --run-dir "$SL/run-$name" \
		--cache-dir "$SL/cache-$name" --workers 1 "$@"
	sl_bg "$SL/log/slurmd-$name.out" nsenter --net="/run/netns/$ns" slurmd -D -N "$name" -f "$SLURM_CONF" \
		${SL_STEPD:+-d "$SL_STEPD"}
}

# sl_ctl NODE ARGS...: cicadactl on NODE's server.
sl_ctl() {
	local n=$1
	shift
	timeout -k 5 60 "$B/bin/cicadactl" --run-dir "$SL/run-$n" "$@"
}

# sl_wait_idle SECONDS: until every node is idle.
sl_wait_idle() {
	for _ in $(seq $(($1 * 4))); do
		[ "$(timeout 10 sinfo -h -N -o %t 2>/dev/null | sort -u)" = idle ] && return 0
		sleep 0.25
	done
	return 1
}

slurm_cluster_up() {
	local n i=0
	sl_programs || return 1
	mkdir -p "$SL" && chmod 755 "$SL"
	sl_conf "$@"
	ip link add "$SL_BR" type bridge && ip addr add "$SL_NET.0.1/24" dev "$SL_BR" && ip link set "$SL_BR" up ||
		{ echo "cluster: cannot make a bridge (root, and iproute2 or tests/tools/ip, are needed)"; return 1; }
	head -c 1024 /dev/urandom >"$SL/munge.key" && chmod 600 "$SL/munge.key"
	sl_bg "$SL/log/munged.out" munged -F --force --socket="$SL/munge.sock" --key-file="$SL/munge.key" \
		--log-file="$SL/log/munged.log" --pid-file="$SL/munged.pid" --seed-file="$SL/munged.seed" --num-threads=4
	for _ in $(seq 50); do [ -S "$SL/munge.sock" ] && break; sleep 0.1; done
	sl_bg "$SL/log/slurmctld.out" slurmctld -D -f "$SLURM_CONF"
	for n in "$@"; do
		i=$((i + 1))
		# shellcheck disable=SC2046  # the node's server options, as words
		sl_node "${n%%:*}" $i $([ "$n" = "${n#*:}" ] || echo "${n#*:}" | tr ':' ' ') ||
			{ echo "cluster: cannot make node ${n%%:*}"; return 1; }
	done
	for n in $SL_NODES; do
		for _ in $(seq 100); do [ -S "$SL/$n.sock" ] && break; sleep 0.1; done
		[ -S "$SL/$n.sock" ] || { echo "cluster: $n's gpu-server did not start:"; tail -n 5 "$SL/server-$n.log"; return 1; }
	done
	sl_wait_idle 60 || { echo "cluster: the nodes did not come up:"; timeout 10 sinfo; tail -n 5 "$SL/log/slurmctld.log"; return 1; }
}

slurm_cluster_down() {
	local p
	[ -n "${SL:-}" ] || return 0
	for p in $SL_PIDS; do kill "$p" 2>/dev/null; done
	sleep 1
	for p in $SL_PIDS; do pkill -9 -P "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
	# what is left of this cluster: slurmstepd and the jobs (their
	# environment names its slurm.conf), the servers' workers (its folder)
	for p in $(pgrep -f "$SL/") $(grep -lsF "SLURM_CONF=$SL/etc/slurm.conf" /proc/[0-9]*/environ | cut -d/ -f3); do
		[ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && kill -9 "$p" 2>/dev/null
	done
	for p in $SL_NETNS; do ip netns del "$p" 2>/dev/null; done
	ip link del "$SL_BR" 2>/dev/null
	SL_PIDS=""
	SL_NODES=""
	SL_NETNS=""
}
