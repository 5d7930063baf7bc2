package testregistry

import (
	"archive/tar"
	"debug/elf"
	"os"
	"runtime"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// StandardOption changes Standard and StandardExpect alike.
type StandardOption func(*standard)

type standard struct {
	busybox bool
	oci     bool
}

// WithBusybox adds a fourth layer with the host's statically linked
// busybox (Debian's busybox-static) as /bin/busybox and links to it
// (/bin/sh, cat, ls, id, stat, pwd, env), for tests that run commands in a
// sandbox made from the image, which has no shell of its own. Without a
// static /bin/busybox on the host the test skips, or fails under CI=true.
func WithBusybox() StandardOption { return func(s *standard) { s.busybox = true } }

// WithOCI gives the image OCI media types (see Config.OCI).
func WithOCI() StandardOption { return func(s *standard) { s.oci = true } }

// busyboxLinks are the commands WithBusybox links to /bin/busybox.
var busyboxLinks = []string{"sh", "cat", "ls", "id", "stat", "pwd", "env"}

// The times of the Standard layers' entries: each layer's own, so a test
// can tell which layer an attribute came from.
var (
	time1 = Epoch
	time2 = Epoch.Add(time.Hour)
	time3 = Epoch.Add(2 * time.Hour)
)

// StandardConfig is the configuration of the Standard image (on the
// host's platform).
func StandardConfig() Config {
	return Config{
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "APP_MODE=test"},
		Cmd:          []string{"/bin/sh", "-c", "echo hi"},
		WorkingDir:   "/home/app",
		User:         "1000:1000",
		ExposedPorts: []string{"8080/tcp"},
	}
}

func at(e Entry, t time.Time) Entry {
	e.ModTime = t
	return e
}

// standardLayers are the entries of the Standard image's layers.
func standardLayers() [][]Entry {
	l1 := []Entry{
		Dir("etc", 0o755),
		File("etc/base.conf", "base v1\n", 0o644),
		Dir("opt", 0o755),
		Dir("opt/old", 0o755),
		File("opt/old/a", "a\n", 0o644),
		File("opt/old/b", "b\n", 0o644),
		Dir("data", 0o755),
		File("data/keep", "keep\n", 0o644),
		Dir("data/gone-dir", 0o755),
		File("data/gone-dir/inner", "inner\n", 0o644),
		Dir("usr", 0o755),
		Dir("usr/bin", 0o755),
		File("usr/bin/tool", "#!/bin/sh\necho tool\n", 0o755),
		Dir("var", 0o755),
		Dir("var/cache", 0o755),
		File("var/cache/top", "top\n", 0o644),
		Dir("var/cache/stuff", 0o755),
		File("var/cache/stuff/one", "1\n", 0o644),
		File("var/cache/stuff/two", "2\n", 0o644),
	}
	appFile := File("home/app/file", "app file\n", 0o640).Owned(1000, 1000)
	appFile.Xattrs = map[string]string{"user.cairn": "test"}
	l2 := []Entry{
		Dir("opt/old", 0o755),
		Whiteout("opt/old/a"),
		Dir("data", 0o755),
		Whiteout("data/gone-dir"),
		Dir("var/cache", 0o750),
		Opaque("var/cache"),
		File("var/cache/new", "new\n", 0o644),
		Dir("usr/bin", 0o755),
		Hardlink("usr/bin/tool-link", "usr/bin/tool"),
		Symlink("usr/bin/t", "tool"),
		File("usr/bin/suid", "suid\n", 0o4755),
		Dir("home", 0o755),
		Dir("home/app", 0o755).Owned(1000, 1000),
		appFile,
	}
	l3 := []Entry{
		Dir("etc", 0o755),
		File("etc/base.conf", "base v2\n", 0o600),
	}
	for i := range l2 {
		l2[i] = at(l2[i], time2)
	}
	for i := range l3 {
		l3[i] = at(l3[i], time3)
	}
	return [][]Entry{l1, l2, l3}
}

// Standard is the reference image: three layers (four WithBusybox) on the
// host's platform under StandardConfig, Docker media types unless WithOCI.
//
//  1. /etc/base.conf; /opt/old/a and b; /data/keep and the directory
//     /data/gone-dir with a file; /usr/bin/tool (0755); /var/cache/top
//     and the directory /var/cache/stuff with two files.
//  2. Whiteouts of /opt/old/a (a file) and /data/gone-dir (a directory);
//     /var/cache made opaque (mode 0750), with /var/cache/new; a hard
//     link /usr/bin/tool-link to the lower layer's /usr/bin/tool; a
//     symbolic link /usr/bin/t -> tool; /usr/bin/suid, setuid root
//     (04755); /home/app (1000:1000) and /home/app/file (1000:1000, 0640,
//     extended attribute user.cairn=test).
//  3. /etc/base.conf again, with other content and mode 0600.
//
// Each layer has entries for the directories it changes, and its entries
// have their own time (Epoch, then an hour, two hours later). What the
// unpacked tree holds is StandardExpect's.
func Standard(t testing.TB, opts ...StandardOption) v1.Image {
	t.Helper()
	s := standardOptions(opts)
	cfg := StandardConfig()
	cfg.OCI = s.oci
	var layers []v1.Layer
	for _, entries := range standardLayers() {
		layers = append(layers, Layer(t, entries...))
	}
	if s.busybox {
		layers = append(layers, Layer(t, busyboxEntries(t)...))
	}
	return Image(t, cfg, layers...)
}

func standardOptions(opts []StandardOption) standard {
	var s standard
	for _, o := range opts {
		o(&s)
	}
	return s
}

// busyboxEntries are the entries of the busybox layer.
func busyboxEntries(t testing.TB) []Entry {
	t.Helper()
	const host = "/bin/busybox"
	f, err := elf.Open(host)
	if err != nil {
		missing(t, "no static busybox: "+err.Error()+" (install busybox-static)")
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			missing(t, host+" is linked dynamically (install busybox-static)")
		}
	}
	body, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{Dir("bin", 0o755), File("bin/busybox", string(body), 0o755)}
	for _, name := range busyboxLinks {
		entries = append(entries, Symlink("bin/"+name, "busybox"))
	}
	return entries
}

// missing skips t, or fails it under CI=true, as testenv.Require does.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Want is what one path of an unpacked image must be.
type Want struct {
	// Type is tar.TypeReg, TypeDir, TypeSymlink, or TypeLink: a regular
	// file that is the same inode as Linkname (so with its Mode, owner,
	// Body and ModTime, which Want repeats).
	Type byte
	// Mode is the permission bits with setuid, setgid and sticky; 0777 for
	// symbolic links, as Linux reports them.
	Mode     int64
	UID, GID int
	// Body is a regular file's content.
	Body string
	// Linkname is a symbolic link's target, or the absolute path of the
	// file a TypeLink shares its inode with.
	Linkname string
	// Xattrs are extended attributes the path must have (it may have
	// others).
	Xattrs  map[string]string
	ModTime time.Time
}

// Expect is what an image unpacked and configured must be.
type Expect struct {
	// Config is the image's configuration; its Platform is filled in.
	Config Config
	// Files has every path of the unpacked tree but its root: absolute
	// paths ("/etc/base.conf") to what each must be.
	Files map[string]Want
	// Absent are paths that must not exist: what the whiteouts and the
	// opaque directory removed, and the markers themselves.
	Absent []string
}

// StandardExpect is what the Standard image made with the same options
// must unpack to.
func StandardExpect(t testing.TB, opts ...StandardOption) Expect {
	t.Helper()
	s := standardOptions(opts)
	cfg := StandardConfig()
	cfg.OCI = s.oci
	cfg.Platform = hostPlatform()
	dir := func(mode int64, mt time.Time) Want { return Want{Type: tar.TypeDir, Mode: mode, ModTime: mt} }
	file := func(body string, mode int64, mt time.Time) Want {
		return Want{Type: tar.TypeReg, Mode: mode, Body: body, ModTime: mt}
	}
	tool := file("#!/bin/sh\necho tool\n", 0o755, time1)
	toolLink := tool
	toolLink.Type, toolLink.Linkname = tar.TypeLink, "/usr/bin/tool"
	suid := file("suid\n", 0o4755, time2)
	appDir := dir(0o755, time2)
	appDir.UID, appDir.GID = 1000, 1000
	appFile := file("app file\n", 0o640, time2)
	appFile.UID, appFile.GID = 1000, 1000
	appFile.Xattrs = map[string]string{"user.cairn": "test"}
	e := Expect{
		Config: cfg,
		Files: map[string]Want{
			"/etc":               dir(0o755, time3),
			"/etc/base.conf":     file("base v2\n", 0o600, time3),
			"/opt":               dir(0o755, time1),
			"/opt/old":           dir(0o755, time2),
			"/opt/old/b":         file("b\n", 0o644, time1),
			"/data":              dir(0o755, time2),
			"/data/keep":         file("keep\n", 0o644, time1),
			"/usr":               dir(0o755, time1),
			"/usr/bin":           dir(0o755, time2),
			"/usr/bin/tool":      tool,
			"/usr/bin/tool-link": toolLink,
			"/usr/bin/t":         {Type: tar.TypeSymlink, Mode: 0o777, Linkname: "tool", ModTime: time2},
			"/usr/bin/suid":      suid,
			"/var":               dir(0o755, time1),
			"/var/cache":         dir(0o750, time2),
			"/var/cache/new":     file("new\n", 0o644, time2),
			"/home":              dir(0o755, time2),
			"/home/app":          appDir,
			"/home/app/file":     appFile,
		},
		Absent: []string{
			"/opt/old/a", "/opt/old/.wh.a",
			"/data/gone-dir", "/data/gone-dir/inner", "/data/.wh.gone-dir",
			"/var/cache/top", "/var/cache/stuff", "/var/cache/stuff/one", "/var/cache/stuff/two",
			"/var/cache/.wh..wh..opq",
		},
	}
	if s.busybox {
		for _, en := range busyboxEntries(t) {
			w := Want{Type: en.Type, Mode: en.Mode, Body: en.Body, Linkname: en.Linkname, ModTime: time1}
			e.Files["/"+en.Name] = w
		}
	}
	return e
}

func hostPlatform() string { return "linux/" + runtime.GOARCH }
