// Package volume is the btrfs storage pool: a btrfs file system (by default a
// sparse loop file under the data dir) holding read-only image subvolumes and
// one writable subvolume per sandbox, the sandbox's root, made as a snapshot
// of its image, and one read-only snapshot per checkpoint. Quota groups are
// on, so each subvolume's exclusive and referenced bytes are known. It only
// touches the disk; which subvolume belongs to what is decided by its
// callers (checkpoint disks: package disks, whose rows name each one).
//
// Layout inside the pool:
//
//	images/<name>          read-only subvolume per image
//	sandboxes/<id>         writable snapshot of an image: the sandbox's root
//	checkpoints/<id>       read-only snapshot of a sandbox's root, one per checkpoint
//	memory/<id>            runsc memory image of a memory checkpoint (subvolume)
//	tmp/                   work area; subvolumes being built, swept at open
package volume
