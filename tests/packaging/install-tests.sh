# install-tests.sh: sourced by run-tests.sh. Test 'install': `make
# install` into a staging root puts every command, library, the CRIU
# plugin and its CRIU, the systemd unit (naming the installed server)
# and the man pages where packaging/packaging.mk says; the installed
# server and client libraries run a program as the build's do; `make
# uninstall` takes everything back but the configuration. With dpkg-deb,
# `make deb`'s package holds the same files under /usr.

INSTALL_FILES="sbin/gpu-server sbin/gpu-migrate sbin/gpu-template sbin/cicadactl bin/gpu-snapshot lib/cicada/libcicada.so
lib/cicada/libcuda.so.1 lib/cicada/libnvidia-ml.so.1 lib/criu/cicada.so
libexec/cicada/cicada-hwbp-probe lib/systemd/system/gpu-server.service
share/man/man8/gpu-server.8 share/man/man8/gpu-migrate.8 share/man/man8/gpu-template.8
share/man/man8/cicadactl.8
share/man/man1/gpu-snapshot.1
share/man/man7/cicada.7 share/doc/cicada/README.md"

# inst_has ROOT PREFIX: every installed file is there; the bundled CRIU
# too where `make bundle` made one.
inst_has() {
	local root=$1 p=$2 f
	for f in $INSTALL_FILES; do
		[ -e "$root$p/$f" ] || { echo "install: $p/$f is missing"; return 1; }
	done
	[ -e "$root/etc/default/gpu-server" ] || { echo "install: /etc/default/gpu-server is missing"; return 1; }
	if [ -x "$B/libexec/criu" ]; then
		[ -x "$root$p/sbin/cicada-criu" ] && [ -x "$root$p/libexec/cicada/criu" ] ||
			{ echo "install: the bundled CRIU is missing"; return 1; }
		grep -q "exec \"$p/libexec/cicada/criu\"" "$root$p/sbin/cicada-criu" ||
			{ echo "install: cicada-criu does not run $p/libexec/cicada/criu"; return 1; }
	fi
	grep -q "^ExecStart=$p/sbin/gpu-server " "$root$p/lib/systemd/system/gpu-server.service" ||
		{ echo "install: the unit does not start $p/sbin/gpu-server"; return 1; }
}

# inst_runs ROOT PREFIX: the installed server, and a program through the
# installed libraries, print what the program prints natively.
inst_runs() {
	local root=$1 p=$2 pid rc
	env $DRIVER_ENV timeout -k 5 120 "$root$p/sbin/gpu-server" --listen "unix:$T/inst.sock" \
		--cache-dir "$T/cache-inst" --workers 1 >"$T/inst.log" 2>&1 &
	pid=$!
	wait_for_server $pid "$T/inst.sock" "$T/inst.log" install || return 1
	deadline 60 env $DRIVER_ENV "$PROGS/vecadd_cubin" >"$T/inst.native" 2>&1
	deadline 60 env CICADA_SERVER="unix:$T/inst.sock" LD_LIBRARY_PATH="$root$p/lib/cicada" \
		"$PROGS/vecadd_cubin" >"$T/inst.out" 2>&1
	rc=$?
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	[ $rc -eq 0 ] && [ -s "$T/inst.out" ] && cmp -s "$T/inst.native" "$T/inst.out" ||
		{ echo "install: the installed libraries ran vecadd_cubin differently (rc $rc)"; diff "$T/inst.native" "$T/inst.out" | head -3; return 1; }
}

# inst_removed ROOT: `make uninstall` left only the configuration.
inst_removed() {
	local left
	left=$(find "$1" -type f ! -path "$1/etc/default/gpu-server")
	[ -z "$left" ] || { echo "uninstall left:"; echo "$left" | head -5; return 1; }
}

t_install() {
	local root=$T/install-root p=/usr/local
	deadline 300 make -s --no-print-directory install DESTDIR="$root" PREFIX=$p >"$T/install.log" 2>&1 ||
		{ tail -3 "$T/install.log"; return 1; }
	inst_has "$root" $p && inst_runs "$root" $p || return 1
	deadline 120 make -s --no-print-directory uninstall DESTDIR="$root" PREFIX=$p >>"$T/install.log" 2>&1 &&
		inst_removed "$root"
}

# The package: the same files under /usr (its criu plugin where criu
# looks without -L).
t_deb() {
	local deb files f
	deadline 300 make -s --no-print-directory deb DEB_DIR="$T/deb" >"$T/deb.log" 2>&1 ||
		{ tail -3 "$T/deb.log"; return 1; }
	deb=$(ls "$T"/deb/cicada_*.deb) || return 1
	files=$(timeout 60 dpkg-deb -c "$deb" | awk '{ print $(NF - 1) == "->" ? $(NF - 2) : $NF }')
	for f in $INSTALL_FILES; do
		case $f in share/man/*) f=$f.gz ;; esac
		grep -qx "./usr/$f" <<<"$files" || { echo "deb: /usr/$f is missing"; return 1; }
	done
}

run_install_tests() {
	want install || return 0
	check "make install: every file in place, the installed server and libraries run a program, uninstall" t_install
	if command -v dpkg-deb >/dev/null && command -v fakeroot >/dev/null && command -v dpkg-shlibdeps >/dev/null; then
		check "make deb: the package holds the same files under /usr" t_deb
	else
		echo "skipped make deb: no dpkg-deb, fakeroot or dpkg-shlibdeps here"
	fi
}
