/*
 * rt_thrust.cu: Thrust as real programs use it (static CUDA runtime, no
 * library but the headers): a radix sort of 16M 32-bit keys, a sort by
 * key of 4M floats, a reduction and an inclusive scan. Each result is
 * checked on the host and its bytes hashed, so a run through Cicada must
 * print exactly what a native run prints.
 */
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include "rt_common.h"

static unsigned next(unsigned &x)
{
	x = x * 1664525u + 1013904223u;
	return x;
}

int main(void)
{
	const size_t n = 16u << 20, m = 4u << 20;
	unsigned seed = 7;
	thrust::host_vector<unsigned> keys(n);
	for (size_t i = 0; i < n; i++)
		keys[i] = next(seed);
	thrust::device_vector<unsigned> dk = keys;
	thrust::sort(dk.begin(), dk.end());
	thrust::host_vector<unsigned> sorted = dk;
	bool ok = true;
	for (size_t i = 1; i < n; i++)
		ok &= sorted[i - 1] <= sorted[i];
	printf("%s radix sort of %zu keys: hash %016llx\n", ok ? "ok  " : "FAIL", n, fnv(sorted.data(), n * 4));
	failures += !ok;

	thrust::host_vector<float> fk(m);
	thrust::host_vector<int> vals(m);
	for (size_t i = 0; i < m; i++) {
		fk[i] = (float)(next(seed) >> 8) / (1 << 24) - 0.5f;
		vals[i] = (int)i;
	}
	thrust::device_vector<float> dfk = fk;
	thrust::device_vector<int> dv = vals;
	thrust::sort_by_key(dfk.begin(), dfk.end(), dv.begin(), thrust::greater<float>());
	thrust::host_vector<float> sk = dfk;
	thrust::host_vector<int> sv = dv;
	ok = true;
	for (size_t i = 0; i < m; i++)
		ok &= fk[sv[i]] == sk[i] && (i == 0 || sk[i - 1] >= sk[i]);
	printf("%s sort by key of %zu floats: hash %016llx %016llx\n", ok ? "ok  " : "FAIL", m, fnv(sk.data(), m * 4),
	       fnv(sv.data(), m * 4));
	failures += !ok;

	thrust::device_vector<unsigned long long> wide(dk.begin(), dk.end());
	unsigned long long sum = thrust::reduce(wide.begin(), wide.end()), want = 0;
	for (size_t i = 0; i < n; i++)
		want += keys[i];
	printf("%s reduce: %llu\n", sum == want ? "ok  " : "FAIL", sum);
	failures += sum != want;

	thrust::inclusive_scan(wide.begin(), wide.end(), wide.begin());
	unsigned long long last = wide.back();
	printf("%s scan: last %llu\n", last == want ? "ok  " : "FAIL", last);
	failures += last != want;
	printf("%s\n", failures ? "FAILED" : "done");
	return failures != 0;
}
