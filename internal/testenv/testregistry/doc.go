// Package testregistry gives tests of image pulls and imports what they
// pull from: an OCI distribution registry on 127.0.0.1 (go-containerregistry's
// in-memory one, over plain HTTP), images built from declared tar entries,
// a reference image whose every file a test can check, the two archive
// formats `cairn image import` reads, and faults.
//
//   - Start serves a registry for the length of a test, with HTTP basic
//     authentication when Options.Username is set, and records the
//     requests clients make (Requests, BlobGets).
//   - Layer builds a gzip-compressed layer from Entry values (Whiteout and
//     Opaque give the markers); Image stacks layers under a Config.
//   - Standard is the reference image of three layers (whiteouts, an opaque
//     directory, hard and symbolic links, a setuid file, an extended
//     attribute, a file owned by 1000:1000) and StandardExpect says what
//     its unpacked tree and config must be; Expect.Check compares a tree
//     with it.
//   - Push and PushIndex put an image, or one image per platform, under a
//     reference; WriteDockerSave, WriteOCILayout and WriteOCILayoutTar write
//     it to disk.
//   - CorruptBlob, ReplaceBlob and DropBlob change how the registry answers
//     for one blob: bytes that do not match the digest, another valid layer
//     of the same size under the digest, no blob. WrongDiffID makes an
//     image whose config names a layer's uncompressed digest wrongly.
//
// Everything is deterministic: the same entries give the same digests, so a
// test may compare digests across runs of the builders.
package testregistry
