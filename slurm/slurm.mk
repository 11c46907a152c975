# slurm.mk: Slurm's SPANK plugin for Cicada (slurm/cicada_spank.h) and
# cicada-slurm, the operator's drain and checkpoint command. The plugin
# is built where Slurm's headers are (Debian's libslurm-dev); it takes
# libslurm's functions from the Slurm program that loads it.

SLURM_SRCS := slurm/spank.c slurm/config.c slurm/job.c slurm/place.c slurm/restore.c
SLURM_OBJS := $(SLURM_SRCS:%.c=$(BUILD)/%.o)
SLURM_PLUGIN := $(BUILD)/lib/slurm/cicada.so

$(BUILD)/slurm/%.o: slurm/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -Islurm -c $< -o $@

$(SLURM_PLUGIN): $(SLURM_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(SLURM_OBJS)

$(BUILD)/bin/cicada-slurm: slurm/cicada-slurm
	@mkdir -p $(@D)
	install -m 755 $< $@

$(BUILD)/lib/slurm/cli_filter.lua: slurm/cli_filter.lua
	@mkdir -p $(@D)
	cp $< $@

all: $(BUILD)/bin/cicada-slurm
ifneq ($(wildcard /usr/include/slurm/spank.h),)
all: $(SLURM_PLUGIN) $(BUILD)/lib/slurm/cli_filter.lua
endif

# make install: cicada-slurm beside cicadactl; the plugin and
# cli_filter.lua, where they were built, in $(CICADA_LIBDIR)/slurm.
.PHONY: install-slurm uninstall-slurm
install-slurm:
	$(INSTALL) -m 755 slurm/cicada-slurm $(DESTDIR)$(SBINDIR)/
	@if [ -e $(SLURM_PLUGIN) ]; then \
		$(INSTALL) -d $(DESTDIR)$(CICADA_LIBDIR)/slurm && \
		$(INSTALL) -m 755 $(SLURM_PLUGIN) $(DESTDIR)$(CICADA_LIBDIR)/slurm/ && \
		$(INSTALL) -m 644 slurm/cli_filter.lua $(DESTDIR)$(CICADA_LIBDIR)/slurm/; \
	else echo "install: no Slurm plugin built (no libslurm-dev here)"; fi
uninstall-slurm:
	rm -f $(DESTDIR)$(SBINDIR)/cicada-slurm
	rm -rf $(DESTDIR)$(CICADA_LIBDIR)/slurm

# bundle: Debian's Slurm and munge, for GPU nodes without them
# (tests/slurm/gpu-check.sh), where they are installed here.
ifneq ($(wildcard /usr/sbin/slurmctld),)
$(BUILD)/slurm-root/.stamp: scripts/bundle-slurm.sh
	bash scripts/bundle-slurm.sh $(BUILD) && touch $@
bundle: $(BUILD)/slurm-root/.stamp
endif
