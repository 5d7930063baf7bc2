#!/usr/bin/env bash
# Installs what cairn needs on a Debian 12 machine, skipping what is there:
# btrfs-progs, busybox-static, debootstrap (Debian packages) and gVisor's
# runsc built at a pinned version with CGO_ENABLED=0 (a cgo build fails at
# sandbox start). Needs root. Usage: scripts/install-deps.sh [--test]
# (--test adds what the tests and benchmarks need: staticcheck, versitygw,
# restic, nftables, iproute2 and util-linux's nsenter for reading
# network state back, and Debian's postgresql, whose server the metadata
# tests start in a temporary directory of their own: internal/testenv/pgtest).
set -euo pipefail

RUNSC_MODULE=gvisor.dev/gvisor/runsc
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
STATICCHECK_VERSION=v0.8.2
BIN=/usr/local/bin

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (it installs Debian packages and $BIN/runsc)" >&2
	exit 1
fi
export PATH="$PATH:/usr/local/go/bin:$BIN"

need=()
command -v btrfs >/dev/null || need+=(btrfs-progs)
{ command -v busybox >/dev/null && busybox --list >/dev/null 2>&1 && ! ldd "$(command -v busybox)" >/dev/null 2>&1; } || need+=(busybox-static)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
if [ ${#need[@]} -gt 0 ]; then
	echo "install-deps: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

have_runsc() {
	[ -x "$BIN/runsc" ] && go version -m "$BIN/runsc" 2>/dev/null | grep -q "gvisor.dev/gvisor[[:space:]]*$RUNSC_VERSION"
}
if ! have_runsc; then
	echo "install-deps: building runsc $RUNSC_VERSION (1-3 minutes)"
	CGO_ENABLED=0 GOBIN=$BIN go install "$RUNSC_MODULE@$RUNSC_VERSION"
fi

if [ "${1:-}" = "--test" ]; then
	if ! { [ -x "$BIN/staticcheck" ] && go version -m "$BIN/staticcheck" | grep -q "$STATICCHECK_VERSION"; }; then
		echo "install-deps: installing staticcheck $STATICCHECK_VERSION"
		GOBIN=$BIN go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	fi
	test_need=()
	command -v restic >/dev/null || test_need+=(restic)
	command -v nft >/dev/null || test_need+=(nftables)      # the network tests read rule sets back
	command -v nsenter >/dev/null || test_need+=(util-linux)
	command -v ip >/dev/null || test_need+=(iproute2)
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || test_need+=(postgresql)
	command -v chromium >/dev/null || test_need+=(chromium) # the console tests drive it (chromedp)
	if [ ${#test_need[@]} -gt 0 ]; then
		echo "install-deps: installing ${test_need[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${test_need[@]}" >/dev/null
	fi
	{ [ -x "$BIN/versitygw" ] && go version -m "$BIN/versitygw" | grep -q "github.com/versity/versitygw[[:space:]]*v1.8.0"; } || { echo "install-deps: installing versitygw v1.8.0"; GOBIN=$BIN go install github.com/versity/versitygw/cmd/versitygw@v1.8.0; }
fi
