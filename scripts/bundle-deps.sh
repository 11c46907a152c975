#!/usr/bin/env bash
# bundle-deps.sh DIR: copies the shared libraries Cicada's binaries need
# beyond a plain Ubuntu/Debian base (libtirpc and its Kerberos libraries,
# libxxhash) into DIR, where the binaries' rpath finds them. This lets a
# build from this machine run on a GPU node that has no -dev packages.
set -euo pipefail
dir=$1
mkdir -p "$dir"
for lib in libtirpc.so.3 libxxhash.so.0 libgssapi_krb5.so.2 libkrb5.so.3 libk5crypto.so.3 \
	   libkrb5support.so.0 libcom_err.so.2 libkeyutils.so.1 libprotobuf-c.so.1 libzstd.so.1; do
	path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !found { print $NF; found = 1 }')
	[ -n "$path" ] || { echo "bundle-deps: $lib not found" >&2; exit 1; }
	cp -L "$path" "$dir/$lib"
done
