// Package lazy restores an off-site checkpoint lazily: the sandbox starts
// on a tree laid out at once (every regular file a hole of its final
// size), served by a FUSE file system of its own (the lazyfs process,
// `cairnd lazyfs`), and the files' data is fetched from the repository as
// it is read and, meanwhile, in the background in manifest order.
//
// The state of one lazy root lives in a directory of its own (plan.json:
// what there is to fill; present: which chunks are durably there; the
// fill socket; the process's pid and log). The lazyfs process owns the
// tree and the present file: it alone writes file data while the fill
// runs. cairnd's Filler fetches chunks and hands them to it over the
// socket, first those a read waits for. See docs/lazy-restore.md.
package lazy
