/*
 * jitcompiler.c: the stand-in's libnvidia-ptxjitcompiler.so.1, which its
 * PTX compiler (jit.c) maps as the driver maps its own. It compiles
 * nothing: only its size counts, some 36 MiB like the driver's, which
 * the process's default mapping area loses while it is mapped.
 */
char fc_ptxjit_room[36 << 20] __attribute__((used));
