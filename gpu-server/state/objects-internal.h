/*
 * objects-internal.h: what objects.c (the records kept while a session
 * runs), objects_save.c (a checkpoint's description of them) and
 * objects_restore.c (making them again) share. The gpu-server's other
 * files see only gpu-server.h.
 */
#ifndef CICADA_OBJECTS_INTERNAL_H
#define CICADA_OBJECTS_INTERNAL_H

#include "state.h"

enum { OBJ_ARRAY = 1, OBJ_TEX, OBJ_SURF, OBJ_GRAPH, OBJ_EXEC };

#define SPARE_MAX 4096                       /* texture values held while restoring */

struct tex_rec {
	uint64_t value;
	uint64_t after;                      /* the replay log's seq when made */
	int surface;
	char *args;                          /* tex_object_args, as XDR */
	size_t len;
};

struct alias {
	CUgraphNode from, to;                /* from: NULL until its graph is back */
	uint64_t id;                         /* the client's id of from */
};

/* A restored exec was instantiated from its rebuilt shadow, not from the
 * graph whose nodes the client names in exec calls: alias maps those
 * nodes to the shadow's. */
struct exec_rec {
	CUgraphExec exec;
	CUgraph shadow;                      /* what a restore instantiates */
	unsigned long long flags;
	uint64_t after;                      /* the replay log's seq when instantiated */
	const char *stale;                   /* why the shadow cannot be trusted */
	struct alias *alias;
	unsigned nalias;
};

/* While a restore runs: which objects are back, and the texture values
 * held so that the next ones come back with theirs. */
struct restoring {
	char *done;
	uint64_t *spare;
	unsigned nspare;
};

struct objects {
	struct tex_rec *tex;
	unsigned ntex, cap_tex;
	struct exec_rec *execs;
	unsigned nexecs, cap_execs;
	struct restoring r;
};

struct objects *objects_of(struct worker *w);
struct exec_rec *objects_exec_find(struct worker *w, CUgraphExec exec);
char *objects_encode(xdrproc_t xargs, void *args, size_t *len);
int objects_decode(xdrproc_t xargs, void *args, const void *buf, size_t len);
CUresult objects_array_copy(CUarray a, void *host, int to_host, size_t *size);

#endif
