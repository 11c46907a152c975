# packaging.mk: `make install`, `make uninstall` and `make deb`.
#
# make install [PREFIX=/usr/local] [DESTDIR=]   (after `make all`)
#   $(SBINDIR)   gpu-server, gpu-migrate, gpu-template, cicadactl, cicada-slurm   $(BINDIR)  gpu-snapshot
#   $(CICADA_LIBDIR)  libcicada.so, its libcuda.so.1 name and
#                libnvidia-ml.so.1: a folder of their own, never on the
#                system's library path, so they never shadow the driver
#   $(CRIU_PLUGIN_DIR)  cicada.so (PREFIX=/usr: /usr/lib/criu, where
#                criu looks without -L)
#   $(LIBEXECDIR)  cicada-hwbp-probe; and CRIU, where `make bundle` put
#                it: the binary (criu) with its wrapper in
#                $(SBINDIR)/cicada-criu and its libraries in
#                $(CICADA_LIBDIR)/criu-deps
#   $(SYSTEMD_UNIT_DIR)  gpu-server.service; $(SYSCONFDIR)/default/gpu-server
#   man pages and the documentation
# make deb: cicada_$(VERSION)_$(DEB_ARCH).deb in $(DEB_DIR), with
#   dpkg-deb; Depends from dpkg-shlibdeps.

PREFIX          ?= /usr/local
DESTDIR         ?=
BINDIR          ?= $(PREFIX)/bin
SBINDIR         ?= $(PREFIX)/sbin
LIBDIR          ?= $(PREFIX)/lib
CICADA_LIBDIR   ?= $(LIBDIR)/cicada
CRIU_PLUGIN_DIR ?= $(LIBDIR)/criu
LIBEXECDIR      ?= $(PREFIX)/libexec/cicada
MANDIR          ?= $(PREFIX)/share/man
DOCDIR          ?= $(PREFIX)/share/doc/cicada
SYSTEMD_UNIT_DIR ?= $(LIBDIR)/systemd/system
SYSCONFDIR      ?= /etc
INSTALL         ?= install

# (Deferred: only `make deb` runs git and dpkg.) A tag v1.2 gives 1.2;
# untagged, 0.0~gitDATE.HASH of the last commit.
VERSION  ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' 2>/dev/null) && echo "$${v\#v}" || \
              git log -1 --format='0.0~git%cd.%h' --date=format:%Y%m%d 2>/dev/null || echo 0.0)
DEB_ARCH ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR  ?= $(BUILD)/deb
DEB       = $(DEB_DIR)/cicada_$(VERSION)_$(DEB_ARCH).deb

INSTALL_BUILT := $(SERVER_BIN) $(MIGRATE_BIN) $(TEMPLATE_BIN) $(CTL_BIN) $(SNAPSHOT_BIN) $(INTERPOSER_LIB) $(NVML_LIB) \
                 $(PLUGIN_SO) $(HWBP_PROBE)
MAN_PAGES := packaging/man/gpu-server.8 packaging/man/gpu-migrate.8 packaging/man/gpu-template.8 \
             packaging/man/cicadactl.8 \
             packaging/man/gpu-snapshot.1 \
             packaging/man/cicada.7

# The unit names the installed paths.
$(BUILD)/packaging/gpu-server.service: packaging/gpu-server.service.in
	@mkdir -p $(@D)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< >$@.tmp && mv $@.tmp $@
# (The unit depends on PREFIX and SYSCONFDIR: made again at every install.)
.PHONY: $(BUILD)/packaging/gpu-server.service

.PHONY: install uninstall deb
install: $(INSTALL_BUILT) $(BUILD)/packaging/gpu-server.service
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(CICADA_LIBDIR) \
		$(DESTDIR)$(CRIU_PLUGIN_DIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(SYSTEMD_UNIT_DIR) \
		$(DESTDIR)$(SYSCONFDIR)/default $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/examples
	$(INSTALL) -m 755 $(SERVER_BIN) $(MIGRATE_BIN) $(TEMPLATE_BIN) $(CTL_BIN) $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 755 $(SNAPSHOT_BIN) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 755 $(INTERPOSER_LIB) $(NVML_LIB) $(DESTDIR)$(CICADA_LIBDIR)/
	ln -sf libcicada.so $(DESTDIR)$(CICADA_LIBDIR)/libcuda.so.1
	$(INSTALL) -m 755 $(PLUGIN_SO) $(DESTDIR)$(CRIU_PLUGIN_DIR)/cicada.so
	$(INSTALL) -m 755 $(HWBP_PROBE) $(DESTDIR)$(LIBEXECDIR)/
	$(INSTALL) -m 644 $(BUILD)/packaging/gpu-server.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/gpu-server ] || \
		$(INSTALL) -m 644 packaging/gpu-server.default $(DESTDIR)$(SYSCONFDIR)/default/gpu-server
	$(INSTALL) -m 644 packaging/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 packaging/man/*.7 $(DESTDIR)$(MANDIR)/man7/
	$(INSTALL) -m 644 packaging/man/*.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 644 README.md CONTRIBUTING.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	$(INSTALL) -d $(DESTDIR)$(DOCDIR)/bench
	$(INSTALL) -m 644 bench/RESULTS.md $(DESTDIR)$(DOCDIR)/bench/
	$(INSTALL) -m 644 packaging/accept-migrations.conf $(DESTDIR)$(DOCDIR)/examples/
	$(MAKE) --no-print-directory install-criu install-slurm

# The CRIU that `make deps` built with the project's patches, as `make
# bundle` gathered it; its wrapper names the installed paths. Without a
# bundle (no `make deps` here), a system criu is used and this says so.
.PHONY: install-criu
install-criu:
	@if [ ! -x $(BUILD)/libexec/criu ]; then \
		echo "install: no bundled CRIU in $(BUILD)/libexec ('make deps bundle'); a system criu will be used"; \
	else \
		$(INSTALL) -d $(DESTDIR)$(CICADA_LIBDIR)/criu-deps && \
		$(INSTALL) -m 755 $(BUILD)/libexec/criu $(DESTDIR)$(LIBEXECDIR)/criu && \
		$(INSTALL) -m 644 $(BUILD)/lib/criu-deps/* $(DESTDIR)$(CICADA_LIBDIR)/criu-deps/ && \
		sed -e 's|@LIBEXEC@|$(LIBEXECDIR)|g' -e 's|@CRIU_DEPS@|$(CICADA_LIBDIR)/criu-deps|g' \
			scripts/criu-wrapper.in >$(DESTDIR)$(SBINDIR)/cicada-criu && \
		chmod 755 $(DESTDIR)$(SBINDIR)/cicada-criu; \
	fi

# The configuration file ($(SYSCONFDIR)/default/gpu-server) is left.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/gpu-server $(DESTDIR)$(SBINDIR)/gpu-migrate $(DESTDIR)$(SBINDIR)/gpu-template \
		$(DESTDIR)$(SBINDIR)/cicadactl \
		$(DESTDIR)$(BINDIR)/gpu-snapshot
	rm -f $(DESTDIR)$(CICADA_LIBDIR)/libcicada.so $(DESTDIR)$(CICADA_LIBDIR)/libcuda.so.1 \
		$(DESTDIR)$(CICADA_LIBDIR)/libnvidia-ml.so.1
	rm -f $(DESTDIR)$(CRIU_PLUGIN_DIR)/cicada.so $(DESTDIR)$(LIBEXECDIR)/cicada-hwbp-probe
	rm -f $(DESTDIR)$(SBINDIR)/cicada-criu $(DESTDIR)$(LIBEXECDIR)/criu
	rm -rf $(DESTDIR)$(CICADA_LIBDIR)/criu-deps
	rm -f $(DESTDIR)$(SYSTEMD_UNIT_DIR)/gpu-server.service
	rm -f $(DESTDIR)$(MANDIR)/man8/gpu-server.8 $(DESTDIR)$(MANDIR)/man8/gpu-migrate.8 \
		$(DESTDIR)$(MANDIR)/man8/gpu-template.8 $(DESTDIR)$(MANDIR)/man8/cicadactl.8 \
		$(DESTDIR)$(MANDIR)/man1/gpu-snapshot.1 $(DESTDIR)$(MANDIR)/man7/cicada.7
	rm -rf $(DESTDIR)$(DOCDIR)
	$(MAKE) --no-print-directory uninstall-slurm
	-rmdir $(DESTDIR)$(CICADA_LIBDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(CRIU_PLUGIN_DIR) 2>/dev/null

# The package: `make install` into a staging root with the Debian paths,
# then dpkg-deb. Binaries are stripped (debug symbols stay in build/).
deb: $(INSTALL_BUILT)
	rm -rf $(DEB_DIR)/root && mkdir -p $(DEB_DIR)/root/DEBIAN
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_DIR)/root) PREFIX=/usr \
		LIBEXECDIR=/usr/libexec/cicada SYSCONFDIR=/etc
	cd $(DEB_DIR)/root && strip --strip-unneeded usr/bin/* usr/lib/cicada/*.so* \
		usr/lib/criu/cicada.so usr/libexec/cicada/* $$(find usr/sbin -type f ! -name cicada-criu ! -name cicada-slurm)
	gzip -9n $(DEB_DIR)/root/usr/share/man/man*/*
	rm -f $(DEB_DIR)/root/usr/share/doc/cicada/CONTRIBUTING.md
	$(INSTALL) -m 644 packaging/debian/copyright $(DEB_DIR)/root/usr/share/doc/cicada/
	$(INSTALL) -m 755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm \
		$(DEB_DIR)/root/DEBIAN/
	echo /etc/default/gpu-server >$(DEB_DIR)/root/DEBIAN/conffiles
	bash packaging/debian/control.sh $(DEB_DIR) $(VERSION) $(DEB_ARCH) $(CUDA_STUBS) \
		>$(DEB_DIR)/root/DEBIAN/control
	fakeroot dpkg-deb --build -Zxz $(DEB_DIR)/root $(DEB)
	@echo "deb: $(DEB)"
