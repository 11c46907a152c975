/*
 * template.h: gpu-template, the cold-start companion of gpu-migrate. A
 * process that has loaded its model is checkpointed once, as a template,
 * and started again from it as often as needed, on any node with a
 * gpu-server, each copy in its own pid namespace:
 *
 *   run.c    gpu-template run: a command as the child of a small init,
 *            the first process of a new pid namespace (what criu needs to
 *            restore copies side by side)
 *   save.c   gpu-template save: criu dump of that namespace, with the GPU
 *            state (Cicada's plugin), and template.txt beside the images
 *   start.c  gpu-template start: criu restore of one more copy, its log
 *            a file of its own
 *   criu.c   running criu with a deadline; the template's small file
 */
#ifndef CICADA_TEMPLATE_H
#define CICADA_TEMPLATE_H

#include <stddef.h>

#define TEMPLATE_FILE "template.txt"

struct template_opts {
	char criu[512];
	char plugins[512];
	char log[512];                       /* run, start: stdout and stderr ("": /dev/null) */
	int leave_running;                   /* save */
	int timeout_s;                       /* criu's deadline */
};

/* run.c */
int template_run(const struct template_opts *o, char **argv);

/* save.c */
int template_save(const struct template_opts *o, int pid, const char *dir);

/* start.c */
int template_start(const struct template_opts *o, const char *dir);

/* criu.c: criu with argv (argv[0] is ignored), its fd 3 keep_fd if >= 0;
 * 0 if it exits 0 within the deadline, else -1 with err (its log named). */
int template_criu(const struct template_opts *o, char **argv, int keep_fd, const char *log, char *err, size_t len);
int template_file_write(const char *dir, const char *log_key, char *err, size_t len);
int template_file_read(const char *dir, char *log_key, size_t key_len, char *err, size_t len);

#endif
