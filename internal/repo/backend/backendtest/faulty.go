package backendtest

import (
	"context"
	"sync"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// Op names a Backend method for fault injection.
type Op string

// The operations Faulty can fail.
const (
	OpSave   Op = "save"
	OpCreate Op = "create"
	OpLoad   Op = "load"
	OpStat   Op = "stat"
	OpList   Op = "list"
	OpRemove Op = "remove"
)

// Faulty wraps a Backend and fails the calls that its injector picks. It
// stands for a location that is down, full, or crashes mid-upload.
type Faulty struct {
	b      backend.Backend
	mu     sync.Mutex
	inject func(op Op, name string) error
}

var _ backend.Backend = (*Faulty)(nil)

// NewFaulty wraps b with no faults.
func NewFaulty(b backend.Backend) *Faulty { return &Faulty{b: b} }

// Inject sets the function asked before every call; a non-nil error it
// returns fails the call without reaching the wrapped backend. nil clears it.
func (f *Faulty) Inject(fn func(op Op, name string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject = fn
}

func (f *Faulty) fault(op Op, name string) error {
	f.mu.Lock()
	inject := f.inject
	f.mu.Unlock()
	if inject == nil {
		return nil
	}
	return inject(op, name)
}

// Save implements backend.Backend.
func (f *Faulty) Save(ctx context.Context, name string, data []byte) error {
	if err := f.fault(OpSave, name); err != nil {
		return err
	}
	return f.b.Save(ctx, name, data)
}

// Create implements backend.Backend.
func (f *Faulty) Create(ctx context.Context, name string, data []byte) error {
	if err := f.fault(OpCreate, name); err != nil {
		return err
	}
	return f.b.Create(ctx, name, data)
}

// Load implements backend.Backend.
func (f *Faulty) Load(ctx context.Context, name string) ([]byte, error) {
	if err := f.fault(OpLoad, name); err != nil {
		return nil, err
	}
	return f.b.Load(ctx, name)
}

// Stat implements backend.Backend.
func (f *Faulty) Stat(ctx context.Context, name string) (backend.Info, error) {
	if err := f.fault(OpStat, name); err != nil {
		return backend.Info{}, err
	}
	return f.b.Stat(ctx, name)
}

// List implements backend.Backend.
func (f *Faulty) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	if err := f.fault(OpList, prefix); err != nil {
		return nil, err
	}
	return f.b.List(ctx, prefix)
}

// Remove implements backend.Backend.
func (f *Faulty) Remove(ctx context.Context, name string) error {
	if err := f.fault(OpRemove, name); err != nil {
		return err
	}
	return f.b.Remove(ctx, name)
}
