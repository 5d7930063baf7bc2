// Package unpack applies the layers of an OCI or Docker image (each an
// uncompressed tar stream) one after another into a directory on the
// host, the subvolume that becomes the image's read-only root.
//
// A layer is a change set: regular files, directories, symbolic and hard
// links, devices and FIFOs with their owners (numbers, never names), modes
// (setuid, setgid and sticky kept), times and extended attributes, plus
// whiteouts (".wh.NAME" deletes NAME of the layers below) and opaque
// markers (".wh..wh..opq" hides everything the layers below put in its
// directory, whatever its place in the tar). docs/image-layers.md says how
// each entry is applied.
//
// Layers are untrusted input. Every object is made through a directory
// descriptor, one name at a time, with no symbolic link ever followed:
// a name with a ".." component is refused, a leading "/" is dropped (names
// are below the root), and a path that passes a symbolic link already in
// the tree is refused, whether the entry makes a file, names the target
// of a hard link or is a whiteout. Nothing outside the root is read,
// written or removed. Limits (Options) bound the entries and bytes of a
// layer; names are bounded to MaxNameLen bytes and MaxDepth components.
//
// Apply returns at the first error and leaves what it had done: the caller
// removes the whole tree (it deletes the subvolume).
package unpack
