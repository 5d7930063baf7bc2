package unpack

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// An attribute the file system does not support (ENOTSUP) is skipped and
// counted; any other refusal is an error. A pipe stands for such a file
// system: it has no trusted.* (ENOTSUP) and refuses user.* (EPERM).
func TestXattrsNotSupportedAreSkipped(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	a := newApplier(context.Background(), nil, Options{})
	o := object{fd: p[0], path: "pipe", kind: unix.S_IFREG}
	m := meta{xattrs: []xattr{{"trusted.a", []byte("1")}, {"trusted.b", []byte("2")}}}
	if err := a.setXattrs(o, m, false); err != nil || a.stats.XattrsSkipped != 2 {
		t.Fatalf("ENOTSUP: %v, %d skipped", err, a.stats.XattrsSkipped)
	}
	m = meta{xattrs: []xattr{{"user.a", []byte("1")}}}
	if err := a.setXattrs(o, m, false); !errors.Is(err, unix.EPERM) {
		t.Fatalf("EPERM: %v", err)
	}
}

func TestAppliedXattrs(t *testing.T) {
	for name, want := range map[string]bool{
		"user.mime_type": true, "security.capability": true, "system.posix_acl_access": true,
		"system.posix_acl_default": true, "trusted.md5": true,
		"trusted.overlay.opaque": false, "security.selinux": false, "security.ima": false, "security.evm": false,
		"security.SMACK64": false, "system.nfs4_acl": false, "btrfs.compression": false, "other.x": false, "user": false,
	} {
		if applied(name) != want {
			t.Errorf("%s applied: %v, want %v", name, !want, want)
		}
	}
}
