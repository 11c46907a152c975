/*
 * criu_path.c: which criu gpu-server and gpu-migrate run when not told
 * (--criu), and where its Cicada plugin lies. Installed, cicada-criu
 * beside the program (`make install`: the CRIU that `make deps` built,
 * with its wrapper), before any system criu in the same folder; in a
 * build tree, bin/criu beside it (scripts/bundle-criu.sh); else a system
 * criu. The plugin is in ../lib/criu.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "session.h"

/* The folder this program lies in, or "." where /proc cannot tell. */
static void self_dir(char *dir, size_t len)
{
	char self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	self[n > 0 ? n : 0] = 0;
	snprintf(dir, len, "%s", n > 0 ? self : ".");
	if ((slash = strrchr(dir, '/')))
		*slash = 0;
}

void criu_default_paths(char *criu, size_t criu_len, char *plugins, size_t plugins_len)
{
	static const char *const names[] = { "cicada-criu", "criu" };
	static const char *const system[] = { "/usr/local/sbin/criu", "/usr/sbin/criu" };
	char dir[1024], path[1100];

	self_dir(dir, sizeof(dir));
	if (plugins && !plugins[0])
		snprintf(plugins, plugins_len, "%s/../lib/criu", dir);
	if (!criu || criu[0])
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (!access(path, X_OK)) {
			snprintf(criu, criu_len, "%s", path);
			return;
		}
	}
	snprintf(criu, criu_len, "%s", access(system[0], X_OK) ? system[1] : system[0]);
}
