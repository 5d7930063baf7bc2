package revert

import (
	"reflect"
	"testing"
)

func TestFailRunsStepsNewestFirst(t *testing.T) {
	var got []int
	r := New()
	r.Add(func() { got = append(got, 1) })
	r.Add(func() { got = append(got, 2) })
	r.Fail()
	r.Fail() // a second Fail does nothing
	if want := []int{2, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("undo order = %v, want %v", got, want)
	}
}

func TestSuccessKeepsTheChange(t *testing.T) {
	ran := false
	r := New()
	r.Add(func() { ran = true })
	r.Success()
	r.Fail()
	if ran {
		t.Fatal("undo step ran after Success")
	}
}
