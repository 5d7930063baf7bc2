// Package revert undoes the finished steps of a multi-step change when a
// later step fails, so that failures leave nothing half-made:
//
//	undo := revert.New()
//	defer undo.Fail()
//	… do step 1; undo.Add(undoStep1)
//	… do step 2; undo.Add(undoStep2)
//	undo.Success()
//
// Fail runs the undo steps in reverse order unless Success was called.
package revert

// Reverter collects undo steps.
type Reverter struct {
	steps []func()
}

// New returns an empty Reverter.
func New() *Reverter { return &Reverter{} }

// Add records an undo step.
func (r *Reverter) Add(f func()) { r.steps = append(r.steps, f) }

// Fail runs the recorded steps, newest first, unless Success was called.
func (r *Reverter) Fail() {
	for i := len(r.steps) - 1; i >= 0; i-- {
		r.steps[i]()
	}
	r.steps = nil
}

// Success forgets the recorded steps: the change is kept.
func (r *Reverter) Success() { r.steps = nil }
