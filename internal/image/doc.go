// Package image builds and lists the read-only root file systems sandboxes
// start from. Each image is a read-only subvolume of the pool, built once on
// first use (into the pool's work area, then snapshotted read-only into
// place, so a half-built image is never visible) and shared by every sandbox
// made from it.
package image
