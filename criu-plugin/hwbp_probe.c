/*
 * hwbp_probe.c: cicada-hwbp-probe, which tells whether this host delivers
 * hardware breakpoints to a ptrace tracer. CRIU's compel catches the end
 * of its parasite with one (a debug register set by PTRACE_POKEUSER); some
 * hypervisors accept the register but never raise the trap, and criu then
 * waits forever. The probe does what compel does, on a child of its own:
 * it stops the child, sets an execute breakpoint on a function the child
 * calls next, and waits at most half a second for the SIGTRAP.
 *
 * Prints "delivered" and exits 0, or prints "not delivered: why" and
 * exits 1. build/bin/criu runs it once per boot (scripts/bundle-criu.sh)
 * and sets CRIU_FAULT=130, CRIU's switch to trace syscalls instead, where
 * breakpoints are not delivered.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 500

__attribute__((noinline)) void probe_target(void)
{
	__asm__ volatile("" ::: "memory");
}

static void child(void)
{
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(3);
	raise(SIGSTOP);
	probe_target();
	_exit(0);
}

/* Waits up to WAIT_MS for the child to stop or end; 0 if nothing came. */
static int wait_child(pid_t pid, int *status)
{
	for (int i = 0; i < WAIT_MS; i++) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 1;
		if (r < 0)
			return -1;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 0;
}

static void finish(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

#if defined(__x86_64__)
static int set_breakpoint(pid_t pid)
{
	size_t dr0 = offsetof(struct user, u_debugreg[0]), dr7 = offsetof(struct user, u_debugreg[7]);

	/* DR0 = the address; DR7: local enable of DR0, break on execution. */
	if (ptrace(PTRACE_POKEUSER, pid, (void *)dr0, (void *)probe_target))
		return -1;
	return ptrace(PTRACE_POKEUSER, pid, (void *)dr7, (void *)1UL) ? -1 : 0;
}
#endif

int main(void)
{
#if !defined(__x86_64__)
	printf("delivered (not probed on this architecture)\n");
	return 0;
#else
	int status, got;
	pid_t pid = fork();

	if (pid < 0) {
		printf("not delivered: cannot fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0)
		child();
	if (wait_child(pid, &status) != 1 || !WIFSTOPPED(status)) {
		finish(pid);
		printf("not delivered: the probe's child did not stop under ptrace\n");
		return 1;
	}
	if (set_breakpoint(pid)) {
		printf("not delivered: the debug registers cannot be set (%s)\n", strerror(errno));
		finish(pid);
		return 1;
	}
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	got = wait_child(pid, &status);
	finish(pid);
	if (got == 1 && WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
		printf("delivered\n");
		return 0;
	}
	printf("not delivered: the breakpoint was set but %s\n",
	       got == 1 ? "the child ran past it" : "no trap came");
	return 1;
#endif
}
