#!/usr/bin/env bash
# count-crashes.sh LOG RC: how many real crashes a libFuzzer run found,
# from its log and exit status. libFuzzer writes a unit for each crash,
# leak, out-of-memory and timeout (crash-, leak-, oom-, timeout-), and also
# for a merely slow input (slow-unit-, when a loaded machine is slow):
# only the first four count. A non-zero exit with none of them counts as
# one crash (the log's error line says what), so nothing is missed.
log=$1 rc=$2
n=$(grep -cE 'Test unit written to .*/(crash|leak|oom|timeout)-' "$log")
if [ "$n" -eq 0 ] && [ "$rc" -ne 0 ]; then
	n=1
fi
echo "$n"
