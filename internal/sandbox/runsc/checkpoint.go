package runsc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The fast path of Checkpoint: what `runsc checkpoint --compression=none
// [--leave-running]` does (runsc/cmd/checkpoint.go, container.Checkpoint,
// sandbox.Checkpoint at Pinned), done inside cairnd. A memory checkpoint
// runs while the sandbox is paused, and starting runsc costs 10-15 ms,
// which is most of what cairn adds to a small checkpoint. runsc does:
//
//  1. Read the container's state file (under its lock) and require the
//     status "created", "running" or "paused".
//  2. Create the image's three files in the image directory, O_EXCL:
//     checkpoint.img, pages_meta.img and pages.img (createSaveFiles).
//  3. Call containerManager.Checkpoint on the sandbox's control socket with
//     control.SaveOpts as the argument and the three files, in that order,
//     as its file payload, and wait for the answer: the sandbox writes the
//     image, then resumes (Resume, from --leave-running) or exits.
//
// It does not write the state file. Here the same, with one difference:
// the files are removed again when the call cannot be made, so that runsc,
// which then runs instead (see "Falling back" in the package comment), can
// create them.

const methodCheckpoint = "containerManager.Checkpoint"

// Names of the image's files (runsc/checkpointfiles at Pinned).
var imageFiles = []string{"checkpoint.img", "pages_meta.img", "pages.img"}

// saveOpts is the part of gVisor's control.SaveOpts that cairn sets; the
// sandbox takes the fields left out as zero, as runsc sends them.
type saveOpts struct {
	// Metadata goes into the image's header; runsc sends the compression.
	Metadata map[string]string `json:"metadata"`
	// HavePagesFile: the payload has pages_meta.img and pages.img too.
	HavePagesFile bool `json:"have_pages_file"`
	// Resume: the sandbox carries on after the save instead of exiting
	// (gVisor's field has no JSON tag).
	Resume bool `json:"Resume"`
}

// checkpointControl is Checkpoint's fast path. Errors wrapping
// *fallbackError mean nothing happened and runsc may be run instead.
func (r *Runsc) checkpointControl(ctx context.Context, id, imageDir string, leaveRunning bool) error {
	c, err := r.lockState(ctx, id, "checkpoint")
	if err != nil {
		return err
	}
	c.release() // runsc, too, reads the state and lets go of the lock
	switch c.Status {
	case "created", "running", "paused":
	default:
		return fmt.Errorf("runsc checkpoint: %w: container %q is %s", ErrWrongState, id, c.Status)
	}
	if err := os.MkdirAll(imageDir, 0o755); err != nil {
		return err
	}
	files, err := createImageFiles(imageDir)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	opts := saveOpts{Metadata: map[string]string{"compression": "none"}, HavePagesFile: true, Resume: leaveRunning}
	sockets := []string{c.Sandbox.ControlSocketPath, filepath.Join(r.stateRoot, "runsc-"+id+".sock")}
	// No bound on the wait but ctx: the save takes as long as the memory
	// takes to write.
	err = callWith(ctx, sockets, methodCheckpoint, opts, files, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errRemote), ctx.Err() != nil:
		// The save failed, or the caller gave up on it: the files are no
		// image, and the caller throws the directory away.
		return fmt.Errorf("runsc checkpoint: %w", err)
	}
	removeFiles(files)
	return &fallbackError{fmt.Errorf("control call %s: %w", methodCheckpoint, err)}
}

// createImageFiles creates the image's files in dir, as runsc does: new
// files only, mode 0644, read-write.
func createImageFiles(dir string) ([]*os.File, error) {
	var files []*os.File
	for _, name := range imageFiles {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err != nil {
			removeFiles(files)
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("memory image: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// removeFiles removes files by name; they stay open.
func removeFiles(files []*os.File) {
	for _, f := range files {
		os.Remove(f.Name())
	}
}
