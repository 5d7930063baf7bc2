package offsite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/limit"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/retry"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
)

// Config is an account's off-site configuration, as written in cairnd's
// config file (docs/offsite.md). The zero value is the embedded default:
// two directories under the data dir and a key file generated there.
type Config struct {
	// Disabled turns off-site copies off: nothing is uploaded and
	// checkpoints show "off".
	Disabled bool `json:"disabled,omitempty"`
	// KeyFile holds the secret that unlocks the account's master key (the
	// key slots stored in the locations are sealed with it). Created with
	// 32 random bytes when missing. Default DATA-DIR/offsite/account.key.
	KeyFile string `json:"key_file,omitempty"`
	// Locations are the account's two object stores. Default: directories
	// DATA-DIR/offsite/primary and DATA-DIR/offsite/secondary.
	Locations []LocationConfig `json:"locations,omitempty"`
	// RetryMax is the longest wait between attempts to reach a failing
	// location or upload a failing checkpoint (default 1m).
	RetryMax Duration `json:"retry_max,omitempty"`
}

// LocationConfig is one location: a directory or an S3 bucket.
type LocationConfig struct {
	Name string      `json:"name"`
	Dir  string      `json:"dir,omitempty"`
	S3   *S3Location `json:"s3,omitempty"`
}

// S3Location reaches a bucket of an S3-compatible store.
type S3Location struct {
	Endpoint  string `json:"endpoint"` // host:port
	Bucket    string `json:"bucket"`
	Prefix    string `json:"prefix,omitempty"`
	Region    string `json:"region,omitempty"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Secure    bool   `json:"secure,omitempty"` // HTTPS
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes a Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// WithDefaults fills what cfg leaves out from the data dir and checks the
// rest.
func (cfg Config) WithDefaults(dataDir string) (Config, error) {
	if cfg.KeyFile == "" {
		cfg.KeyFile = filepath.Join(dataDir, "offsite", "account.key")
	}
	if len(cfg.Locations) == 0 {
		cfg.Locations = []LocationConfig{
			{Name: "primary", Dir: filepath.Join(dataDir, "offsite", "primary")},
			{Name: "secondary", Dir: filepath.Join(dataDir, "offsite", "secondary")},
		}
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = Duration(time.Minute)
	}
	if cfg.Disabled {
		return cfg, nil
	}
	if len(cfg.Locations) != 2 {
		return cfg, fmt.Errorf("off-site: an account has two locations, the config names %d", len(cfg.Locations))
	}
	seen := map[string]bool{}
	for _, l := range cfg.Locations {
		switch {
		case l.Name == "" || backend.CheckName(l.Name) != nil || strings.Contains(l.Name, "/"):
			return cfg, fmt.Errorf("off-site: location name %q: use letters, digits, '.', '_' and '-'", l.Name)
		case seen[l.Name]:
			return cfg, fmt.Errorf("off-site: two locations are called %q", l.Name)
		case (l.Dir == "") == (l.S3 == nil):
			return cfg, fmt.Errorf("off-site: location %s needs exactly one of dir and s3", l.Name)
		case l.S3 != nil && (l.S3.Endpoint == "" || l.S3.Bucket == ""):
			return cfg, fmt.Errorf("off-site: location %s: s3 needs an endpoint and a bucket", l.Name)
		case l.Dir != "" && !filepath.IsAbs(l.Dir):
			return cfg, fmt.Errorf("off-site: location %s: dir %q is not an absolute path", l.Name, l.Dir)
		}
		seen[l.Name] = true
	}
	return cfg, nil
}

// Backend tuning: each call is retried briefly (the upload queue retries a
// failing location for longer, with its own backoff), and at most
// concurrentCalls calls run at once per location.
var (
	callRetry       = retry.Policy{Attempts: 3, Initial: 200 * time.Millisecond, Max: 2 * time.Second}
	concurrentCalls = 4
	// s3StallTimeout is how long an S3 call may go without a byte moving
	// before it fails (see s3.Config.StallTimeout).
	s3StallTimeout = 30 * time.Second
)

// open returns the repository locations of cfg.
func (cfg Config) open() ([]repo.Location, error) {
	var out []repo.Location
	for _, l := range cfg.Locations {
		var b backend.Backend
		var err error
		if l.Dir != "" {
			dir := l.Dir
			b = &lazyBackend{open: func() (backend.Backend, error) { return local.New(dir) }}
		} else {
			b, err = s3.New(s3.Config{Endpoint: l.S3.Endpoint, Secure: l.S3.Secure, Region: l.S3.Region,
				Bucket: l.S3.Bucket, Prefix: l.S3.Prefix, AccessKey: l.S3.AccessKey, SecretKey: l.S3.SecretKey,
				StallTimeout: s3StallTimeout})
		}
		if err != nil {
			return nil, fmt.Errorf("location %s: %w", l.Name, err)
		}
		out = append(out, repo.Location{Name: l.Name, Backend: limit.New(retry.New(b, callRetry), concurrentCalls)})
	}
	return out, nil
}

// keySecret reads the key file, creating it with a random secret if it
// does not exist; created says it did.
func keySecret(path string) (secret []byte, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(strings.TrimSpace(string(b))) == 0 {
			return nil, false, fmt.Errorf("key file %s is empty", path)
		}
		return b, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("key file: %w", err)
	}
	b, err = newKeyFile(path)
	return b, err == nil, err
}

func newKeyFile(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, err
	}
	b := []byte(hex.EncodeToString(secret[:]) + "\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return b, f.Close()
}

// lazyBackend opens its backend at the first call that can: a directory
// that cannot be made now (a mount not there yet) is a location that fails
// its calls, and is retried like any other, not a config error.
type lazyBackend struct {
	open func() (backend.Backend, error)
	mu   sync.Mutex
	b    backend.Backend
}

func (l *lazyBackend) get() (backend.Backend, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b == nil {
		b, err := l.open()
		if err != nil {
			return nil, err
		}
		l.b = b
	}
	return l.b, nil
}

func (l *lazyBackend) Save(ctx context.Context, name string, data []byte) error {
	b, err := l.get()
	if err != nil {
		return err
	}
	return b.Save(ctx, name, data)
}

func (l *lazyBackend) Create(ctx context.Context, name string, data []byte) error {
	b, err := l.get()
	if err != nil {
		return err
	}
	return b.Create(ctx, name, data)
}

func (l *lazyBackend) Load(ctx context.Context, name string) ([]byte, error) {
	b, err := l.get()
	if err != nil {
		return nil, err
	}
	return b.Load(ctx, name)
}

func (l *lazyBackend) Stat(ctx context.Context, name string) (backend.Info, error) {
	b, err := l.get()
	if err != nil {
		return backend.Info{}, err
	}
	return b.Stat(ctx, name)
}

func (l *lazyBackend) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	b, err := l.get()
	if err != nil {
		return nil, err
	}
	return b.List(ctx, prefix)
}

func (l *lazyBackend) Remove(ctx context.Context, name string) error {
	b, err := l.get()
	if err != nil {
		return err
	}
	return b.Remove(ctx, name)
}
