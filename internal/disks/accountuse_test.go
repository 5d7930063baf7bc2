package disks

import (
	"testing"

	"github.com/cairn-sandbox/cairn/internal/volume"
)

func TestAccountUse(t *testing.T) {
	const M = 1 << 20
	img := volume.Usage{Referenced: 10 * M, Exclusive: 10 * M}
	tests := []struct {
		name    string
		usage   map[string]volume.Usage
		members []useMember
		links   [][2]string
		want    int64
	}{{
		// 100 MB written, checkpointed, then 50 MB more: the root holds
		// everything, the checkpoint nothing of its own.
		name: "a line of checkpoints",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/s":    {Referenced: 160 * M, Exclusive: 50 * M},
			"checkpoints/c1": {Referenced: 110 * M, Exclusive: 0}},
		members: []useMember{{Family: "s", Path: "sandboxes/s", Image: "images/base"}, {Family: "s", Path: "checkpoints/c1", Image: "images/base"}},
		want:    150 * M,
	}, {
		// The 100 MB were deleted in the root after the checkpoint and
		// 50 MB written: the checkpoint alone holds the 100.
		name: "data kept by a checkpoint only",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/s":    {Referenced: 60 * M, Exclusive: 50 * M},
			"checkpoints/c1": {Referenced: 110 * M, Exclusive: 100 * M}},
		members: []useMember{{Family: "s", Path: "sandboxes/s", Image: "images/base"}, {Family: "s", Path: "checkpoints/c1", Image: "images/base"}},
		want:    150 * M,
	}, {
		name: "unrelated sandboxes add up",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/a": {Referenced: 30 * M, Exclusive: 20 * M},
			"sandboxes/b": {Referenced: 40 * M, Exclusive: 30 * M}},
		members: []useMember{{Family: "a", Path: "sandboxes/a", Image: "images/base"}, {Family: "b", Path: "sandboxes/b", Image: "images/base"}},
		want:    50 * M,
	}, {
		// Two families of a checkpoint each, sharing all their data
		// inside: each counts once, and the two add up.
		name: "families count apart",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/a": {Referenced: 110 * M}, "checkpoints/ca": {Referenced: 110 * M},
			"sandboxes/b": {Referenced: 70 * M}, "checkpoints/cb": {Referenced: 70 * M}},
		members: []useMember{{Family: "a", Path: "sandboxes/a", Image: "images/base"}, {Family: "a", Path: "checkpoints/ca", Image: "images/base"},
			{Family: "b", Path: "sandboxes/b", Image: "images/base"}, {Family: "b", Path: "checkpoints/cb", Image: "images/base"}},
		want: 160 * M,
	}, {
		// A fork of a's checkpoint shares its data: linked, it is not
		// counted twice.
		name: "a fork joins its source's family",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/a": {Referenced: 110 * M}, "checkpoints/ca": {Referenced: 110 * M},
			"sandboxes/f": {Referenced: 115 * M, Exclusive: 5 * M}},
		members: []useMember{{Family: "a", Path: "sandboxes/a", Image: "images/base"}, {Family: "a", Path: "checkpoints/ca", Image: "images/base"},
			{Family: "f", Path: "sandboxes/f", Image: "images/base"}},
		links: [][2]string{{"f", "a"}, {"a", ""}},
		want:  105 * M,
	}, {
		name: "memory images count whole; a member gone counts nothing",
		usage: map[string]volume.Usage{
			"sandboxes/a": {Referenced: 20 * M, Exclusive: 20 * M}, "memory/m": {Referenced: 64 * M, Exclusive: 64 * M}},
		members: []useMember{{Family: "a", Path: "sandboxes/a"}, {Family: "a", Path: "memory/m", Memory: true}, {Family: "a", Path: "checkpoints/gone"}},
		want:    84 * M,
	}, {
		// Files of the image deleted in the root: its own data is never
		// below what it alone holds, nor below zero.
		name: "a root smaller than its image",
		usage: map[string]volume.Usage{"images/base": img,
			"sandboxes/a": {Referenced: 4 * M, Exclusive: 1 * M}},
		members: []useMember{{Family: "a", Path: "sandboxes/a", Image: "images/base"}},
		want:    1 * M,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := accountUse(tt.usage, tt.members, tt.links); got != tt.want {
				t.Fatalf("accountUse = %d MiB, want %d MiB", got/M, tt.want/M)
			}
		})
	}
}
