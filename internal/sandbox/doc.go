// Package sandbox is the lifecycle manager: it owns the policy around
// sandboxes (name and input validation, one lifecycle operation at a time
// per sandbox through the store's leases, undo on failure, re-adoption
// after a daemon restart) and drives the mechanisms below it: the btrfs
// pool (package volume), images (package image), checkpoint disks
// (package disks, their one owner), the runtime (package runsc) and the
// agent connection to cairn-init inside each sandbox (package agent).
// Metadata is persisted through metadata.Store; a sandbox exists once its
// row is committed. docs/architecture.md draws the packages.
//
// Per sandbox, on the host:
//
//	<pool>/sandboxes/<id>              root subvolume (writable snapshot of the image)
//	<data>/sandboxes/<id>/bundle/      OCI bundle written for runsc
//	<data>/sandboxes/<id>/console.log  cairn-init's own output
//	<data>/sandboxes/<id>/agent.key    the key cairn-init proves itself with (package agent)
//	<data>/sandboxes/<id>/dotcairn/    bound read-only at /.cairn: agent.sock
//	<data>/browse/<id>/                bound read-only at /.cairn/checkpoints (package browse)
//	<data>/bin/                        bound read-only at /.cairn/bin: cairn-init
package sandbox
