# cairn — see README.md. Everything runs as root on Debian 12.
GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/cairn-sandbox/cairn/internal/daemon.Version=$(VERSION) -X github.com/cairn-sandbox/cairn/internal/cli.Version=$(VERSION)
export PATH := $(PATH):/usr/local/go/bin:/usr/local/bin

# CAIRN_LISTEN is where `make run` serves the API over HTTPS and the web
# console (https://127.0.0.1:7443/; log in with a token from `cairn token create`).
CAIRN_LISTEN ?= 127.0.0.1:7443

.PHONY: console-assets build deps test-deps run test crash-trials fault-trials load-trial lazy-trial hosts-trial fuzz lint bench install uninstall clean

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/cairn ./cmd/cairnd ./cmd/cairn-init ./cmd/cairn-env

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

# Starts cairnd in the foreground on its embedded defaults
# (/var/lib/cairn, /run/cairn/cairn.sock). Then, in another shell:
#   bin/cairn create demo && bin/cairn exec demo -- uname -a
run: deps build
	bin/cairnd --listen $(CAIRN_LISTEN)

# The web console's vendored JavaScript (xterm.js): installed from the npm
# registry at the versions pinned in web/package-lock.json and copied,
# with their licenses, into the embedded assets (committed, so that
# `make build` needs no npm). Run after changing web/package.json.
CONSOLE_VENDOR := internal/console/assets/vendor
console-assets:
	cd web && npm ci --no-audit --no-fund --ignore-scripts
	mkdir -p $(CONSOLE_VENDOR)
	cp web/node_modules/@xterm/xterm/lib/xterm.mjs web/node_modules/@xterm/xterm/css/xterm.css $(CONSOLE_VENDOR)/
	cp web/node_modules/@xterm/xterm/LICENSE $(CONSOLE_VENDOR)/LICENSE.xterm
	cp web/node_modules/@xterm/addon-fit/lib/addon-fit.mjs $(CONSOLE_VENDOR)/
	cp web/node_modules/@xterm/addon-fit/LICENSE $(CONSOLE_VENDOR)/LICENSE.addon-fit

# Every test, with real runsc and btrfs (as root), then the linters.
test: test-deps build lint
	CAIRN_BIN=$(CURDIR)/bin $(GO) test -count=1 -timeout 30m ./...

# The crash trials alone, at length: cairnd killed with SIGKILL during
# checkpoint create (disk and memory), delete, restore in place, rollback,
# the browse refresh, fork, snapshot restore, an upload to the two off-site
# locations (versitygw) and the off-site delete with its garbage collection,
# and checked after each restart (docs/crash-trials.md). `make test` runs
# 100; CAIRN_CRASH_SEED=N repeats a run's choices.
CAIRN_CRASH_TRIALS ?= 400
crash-trials: test-deps build
	CAIRN_BIN=$(CURDIR)/bin CAIRN_CRASH_TRIALS=$(CAIRN_CRASH_TRIALS) $(GO) test -count=1 -timeout 90m -v -run '^TestCrashTrials$$' ./test/integration

# The off-site storage-fault tests with long partitions: one location cut
# off for CAIRN_FAULT_PARTITION while the other is flaky (`make test` cuts it
# off for seconds). CAIRN_FAULT_SEED=N changes which requests the proxies
# fault. What they hold: docs/reliability.md.
CAIRN_FAULT_PARTITION ?= 2m
fault-trials: test-deps build
	CAIRN_BIN=$(CURDIR)/bin CAIRN_FAULT_PARTITION=$(CAIRN_FAULT_PARTITION) $(GO) test -count=1 -timeout 60m -v \
		-run '^(TestFaults.*|TestOffsiteStorageFaults)$$' ./internal/offsite ./test/integration

# The load trial at length: CAIRN_LOAD_SANDBOXES sandboxes, each with a
# writer appending to a file, each checkpointed every CAIRN_LOAD_INTERVAL
# for CAIRN_LOAD_DURATION, the oldest checkpoints deleted; no checkpoint
# may fail and cairnd's RSS and fds must stay flat (docs/reliability.md).
# `make test` runs 6 sandboxes for 40s, one checkpoint each every 4s. 60s is
# what 50 sandboxes sustain on the 2-core test machine: at 20s the deletes
# fall behind (docs/reliability.md#load has the figures).
CAIRN_LOAD_SANDBOXES ?= 50
CAIRN_LOAD_DURATION ?= 5m
CAIRN_LOAD_INTERVAL ?= 60s
load-trial: test-deps build
	CAIRN_BIN=$(CURDIR)/bin CAIRN_LOAD_SANDBOXES=$(CAIRN_LOAD_SANDBOXES) CAIRN_LOAD_DURATION=$(CAIRN_LOAD_DURATION) \
		CAIRN_LOAD_INTERVAL=$(CAIRN_LOAD_INTERVAL) $(GO) test -count=1 -timeout 40m -v -run '^TestLoadTrial$$' ./test/integration

# The lazy restore tests at the issue's size: CAIRN_LAZY_FILES files of
# 32 MiB (64: 2 GiB) in the checkpoint that goes off-site only, filled at
# CAIRN_LAZY_RATE in the background (`make test`: 8 files at 16M/s).
# What they hold: docs/lazy-restore.md.
CAIRN_LAZY_FILES ?= 64
CAIRN_LAZY_RATE ?= 64M
lazy-trial: test-deps build
	CAIRN_BIN=$(CURDIR)/bin CAIRN_LAZY_FILES=$(CAIRN_LAZY_FILES) CAIRN_LAZY_RATE=$(CAIRN_LAZY_RATE) $(GO) test -count=1 -timeout 60m -v \
		-run '^TestLazy' ./test/integration

# Two hosts checkpointing their own sandboxes of one account at once for
# CAIRN_HOSTS_DURATION (issue 22's minute; `make test`: 8 s): every
# checkpoint uploaded ×2, verify --offsite clean. docs/several-hosts.md.
CAIRN_HOSTS_DURATION ?= 1m
hosts-trial: test-deps build
	CAIRN_BIN=$(CURDIR)/bin CAIRN_HOSTS_DURATION=$(CAIRN_HOSTS_DURATION) $(GO) test -count=1 -timeout 30m -v \
		-run '^TestHostsCheckpointOneAccountTogether$$' ./test/integration

# The fuzz targets, each for FUZZTIME (go test -fuzz runs one target at a
# time). What they hold and where their seeds are: docs/security-output.md.
# `make test` runs the committed seeds (testdata/fuzz/FuzzX/ and f.Add) as
# ordinary tests; a crasher found here lands in testdata/fuzz/FuzzX/: fix
# the bug and commit the file as a seed.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./api:FuzzReadFrame \
	./api:FuzzReadMessage \
	./internal/initd:FuzzReadRequest \
	./internal/agent:FuzzReplies \
	./internal/server:FuzzSandboxAPI \
	./internal/cli:FuzzHumanOutput \
	./internal/agentauth:FuzzDecode \
	./internal/network/dns:FuzzQuery \
	./internal/network/dns:FuzzUpstreamAnswer
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	staticcheck ./...

bench: test-deps build
	CAIRN_BIN=$(CURDIR)/bin $(GO) run ./bench

# Installs cairn as a service (README.md, "Install as a service"): the four
# binaries side by side in BINDIR (cairnd finds cairn-init, and cairn-env
# beside it, next to itself), the systemd unit, /etc/default/cairnd (only
# if missing) and shell completion for bash, zsh and fish. DESTDIR stages
# the whole tree elsewhere (packaging, tests). It neither enables nor
# starts the unit: systemctl daemon-reload && systemctl enable --now cairnd.
PREFIX         ?= /usr/local
BINDIR         ?= $(PREFIX)/bin
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR     ?= /etc
BASHCOMPDIR    ?= /usr/share/bash-completion/completions
ZSHCOMPDIR     ?= /usr/share/zsh/vendor-completions
FISHCOMPDIR    ?= /usr/share/fish/vendor_completions.d
BINARIES       := cairn cairnd cairn-init cairn-env
INSTALL_FROM   ?= bin
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/default \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	for b in $(BINARIES); do install -m 0755 $(INSTALL_FROM)/$$b $(DESTDIR)$(BINDIR)/$$b; done
	sed 's|@BINDIR@|$(BINDIR)|g' dist/systemd/cairnd.service > $(DESTDIR)$(SYSTEMDUNITDIR)/cairnd.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/cairnd.service
	test -e $(DESTDIR)$(SYSCONFDIR)/default/cairnd || install -m 0644 dist/systemd/cairnd.default $(DESTDIR)$(SYSCONFDIR)/default/cairnd
	$(INSTALL_FROM)/cairn completion bash > $(DESTDIR)$(BASHCOMPDIR)/cairn
	$(INSTALL_FROM)/cairn completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_cairn
	$(INSTALL_FROM)/cairn completion fish > $(DESTDIR)$(FISHCOMPDIR)/cairn.fish
	chmod 0644 $(DESTDIR)$(BASHCOMPDIR)/cairn $(DESTDIR)$(ZSHCOMPDIR)/_cairn $(DESTDIR)$(FISHCOMPDIR)/cairn.fish

# Removes what install put there but /etc/default/cairnd; stop the unit
# first (sandboxes keep running, as after any stop of cairnd).
uninstall:
	for b in $(BINARIES); do rm -f $(DESTDIR)$(BINDIR)/$$b; done
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/cairnd.service $(DESTDIR)$(BASHCOMPDIR)/cairn \
		$(DESTDIR)$(ZSHCOMPDIR)/_cairn $(DESTDIR)$(FISHCOMPDIR)/cairn.fish

clean:
	rm -rf bin
