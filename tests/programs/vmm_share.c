/*
 * vmm_share: two processes share VMM memory the way NCCL shares its
 * buffers: the parent makes an allocation that may be exported as a POSIX
 * file descriptor (cuMemCreate), maps and fills it, exports it
 * (cuMemExportToShareableHandle) and passes the descriptor to a child
 * (this program again) over a unix socket; the child imports it
 * (cuMemImportFromShareableHandle), maps it, checks every value and adds
 * one to each with a kernel; the parent then sees the child's writes. A
 * descriptor that is no export must be refused. With "hold" (a test
 * checkpoints both processes meanwhile and restores them) the child lets
 * go of its handle once the memory is mapped, says "child: holding" and
 * sleeps 20 s before its kernel; with "hold-let-go" the parent also lets
 * go of its own handle once the descriptor is sent (its mapping keeps the
 * memory), which a checkpoint of the pair cannot carry.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static CUfunction fill, inc;
static CUdevice dev;

static void context(void)
{
	CUcontext ctx;
	CUmodule mod;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, load_kernel("kernels_b.cubin", NULL)));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&inc, mod, "inc_u32"));
}

static size_t granularity(CUmemAllocationProp *prop)
{
	size_t g = 0;

	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
	prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK(cuMemGetAllocationGranularity(&g, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	return g;
}

/* Maps handle h of size bytes at a fresh reservation, read-write here. */
static CUdeviceptr map(CUmemGenericAllocationHandle h, size_t size, size_t align)
{
	CUmemAccessDesc access = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUdeviceptr va;

	CHECK(cuMemAddressReserve(&va, size, align, 0, 0));
	CHECK(cuMemMap(va, size, 0, h, 0));
	CHECK(cuMemSetAccess(va, size, &access, 1));
	return va;
}

static int all(CUdeviceptr d, size_t n, unsigned want)
{
	unsigned *h = xmalloc(n * 4);
	int ok = 1;

	CHECK(cuMemcpyDtoH(h, d, n * 4));
	for (size_t i = 0; i < n && ok; i++)
		ok = h[i] == want;
	free(h);
	return ok;
}

static void send_fd(int sock, int fd)
{
	char c = 0, buf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		fail("cannot pass the descriptor");
}

static int recv_fd(int sock)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &m, 0) != 1 || !(cm = CMSG_FIRSTHDR(&m)) || cm->cmsg_type != SCM_RIGHTS)
		fail("no descriptor came");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static int child(int sock, size_t size, int hold)
{
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h, bad;
	size_t g, n = size / 4;
	int fd, null = open("/dev/null", O_RDONLY), ni;
	CUdeviceptr va;
	void *args[2];

	start("vmm_share child");
	context();
	g = granularity(&prop);
	printf("child: a descriptor that is no export is %s\n",
	       cuMemImportFromShareableHandle(&bad, (void *)(intptr_t)null, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ?
	       "refused" : "ACCEPTED");
	fd = recv_fd(sock);
	CHECK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	va = map(h, size, g);
	printf("child: every value is the parent's: %s\n", all(va, n, 7) ? "yes" : "NO");
	if (hold) {
		CHECK(cuMemRelease(h));      /* the mapping keeps the memory */
		printf("child: holding\n");
		fflush(stdout);
		sleep(20);
	}
	ni = (int)n;
	args[0] = &va;
	args[1] = &ni;
	CHECK(cuLaunchKernel(inc, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemUnmap(va, size));
	if (!hold)
		CHECK(cuMemRelease(h));
	CHECK(cuMemAddressFree(va, size));
	printf("child: added one to each, let go of the memory\n");
	return 0;
}

int main(int argc, char **argv)
{
	CUmemAllocationProp prop = { 0 };
	CUmemGenericAllocationHandle h;
	size_t g, size, n;
	unsigned v = 7;
	int sv[2], fd, ni, status;
	char arg[16], sz[32];
	CUdeviceptr va;
	pid_t pid;
	void *args[3];
	int let_go = argc > 1 && !strcmp(argv[1], "hold-let-go");

	if (argc > 3 && !strcmp(argv[1], "--child"))
		return child(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 10), argc > 4);
	start("vmm_share");
	context();
	g = granularity(&prop);
	size = 4 * g;
	n = size / 4;
	CHECK(cuMemCreate(&h, size, &prop, 0));
	va = map(h, size, g);
	ni = (int)n;
	args[0] = &va;
	args[1] = &v;
	args[2] = &ni;
	CHECK(cuLaunchKernel(fill, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	printf("parent: %zu values of 7 in exportable memory, its descriptor to a child\n", n);
	fflush(stdout);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("no socketpair");
	snprintf(arg, sizeof(arg), "%d", sv[1]);
	snprintf(sz, sizeof(sz), "%zu", size);
	if ((pid = fork()) == 0) {
		close(sv[0]);
		execl("/proc/self/exe", argv[0], "--child", arg, sz, argc > 1 && !strncmp(argv[1], "hold", 4) ? "hold" : NULL,
		      (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	send_fd(sv[0], fd);
	close(fd);
	if (let_go)
		CHECK(cuMemRelease(h));
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("the child failed");
	printf("parent: sees the child's writes: %s\n", all(va, n, 8) ? "yes" : "NO");
	CHECK(cuMemUnmap(va, size));
	if (!let_go)
		CHECK(cuMemRelease(h));
	CHECK(cuMemAddressFree(va, size));
	printf("done\n");
	return 0;
}
