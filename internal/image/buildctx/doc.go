// Package buildctx is the build context of "cairn image build" and the
// files its COPY and ADD steps copy: the client's side (which files the
// context holds, written as a tar) and the daemon's (what a COPY's source
// patterns name, a digest of it for the step's cache key, and the copy
// into the image's root).
//
// # The context's tar
//
// WriteContext writes an uncompressed tar (PAX) that cairnd extracts
// with the layer applier (package unpack) into a directory of its own:
//
//	.cairn-build/             the reserved directory (ReservedDir)
//	.cairn-build/Dockerfile   the Dockerfile, wherever -f took it from
//	.cairn-build/dockerignore the .dockerignore applied (may be empty)
//	./                        the context's root, then what it holds
//	…                         in byte order of the names
//
// The reserved entries come first, so that the daemon could read the
// Dockerfile before the rest arrives. A context that itself holds
// .cairn-build at its top is refused (ErrReserved) unless .dockerignore
// excludes it, and so is a name starting with ".wh.", which the layer
// applier would take for a whiteout. Owners are 0:0; modes and
// modification times are kept; symbolic links are sent as links; hard
// links as separate files; devices, sockets and FIFOs are left out. The
// daemon reads the reserved files with ReadDockerfile and ReadIgnore
// (never through a symbolic link), and no COPY or ADD ever sees the
// reserved directory.
//
// .dockerignore (ParseIgnore) has Docker's semantics: one pattern a line,
// "#" comments, patterns cleaned as paths, path.Match syntax per
// component and "**" for any number of them, "!" exceptions, the last
// matching pattern deciding, a pattern matching a directory matching what
// it holds.
//
// # Untrusted trees
//
// On the daemon both trees are untrusted: the context's names came from
// the client, and the image's root was written by earlier RUN steps,
// which may have planted symbolic links anywhere (/x -> /etc,
// /y -> ../../..). Paths in them are resolved with openat2 and
// RESOLVE_IN_ROOT, as a container would resolve them with the tree as
// "/": links are followed, but none leads out. Within a COPY's source
// pattern the links on the way are followed so, but the last component is
// copied as it is (a link as a link); within a directory being copied no
// link is ever followed. In the image's root, every object is made,
// replaced, chowned and chmodded through its directory's descriptor,
// without following a link at its name: a link already there is
// replaced, not written through.
package buildctx
