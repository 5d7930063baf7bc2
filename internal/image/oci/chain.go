package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Chain IDs. The tree after an image's first i layers is named by the
// OCI chain ID of their diff ids (image-spec config.md):
//
//	ChainID(L1) = DiffID(L1)
//	ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))
//
// Two images whose first i layers have the same uncompressed content have
// the same chain ID there, whatever their compression or manifests. A chain
// ID says what a tree holds only because every layer's uncompressed stream
// is checked against its diff id as it is applied (applyLayer), and the
// diff ids come from a config checked against the manifest (Config).

// ChainIDs returns the chain IDs of the diff ids, bottom first: the i-th
// names the tree of the first i+1 layers.
func ChainIDs(diffIDs []v1.Hash) []v1.Hash {
	out := make([]v1.Hash, 0, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out = append(out, d)
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1].String() + " " + d.String()))
		out = append(out, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])})
	}
	return out
}

// Config returns img's config, checked against the digest its manifest
// gives (go-containerregistry checks what it fetches from a registry, not
// what it reads from an OCI layout), and its layers' diff ids, each a
// sha256. A config that does not match, cannot be read or names diff ids
// of another algorithm is I06 (I05 if the registry failed).
func Config(img v1.Image) (*v1.ConfigFile, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fetchError(err, "manifest")
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fetchError(err, "config")
	}
	if m.Config.Digest.Algorithm != "sha256" {
		return nil, errdefs.New(api.CodeImageDamaged, "image config %s: not a sha256 digest", m.Config.Digest)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != m.Config.Digest.Hex {
		return nil, errdefs.New(api.CodeImageDamaged, "image config: its digest is sha256:%x, its manifest says %s", sum, m.Config.Digest)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, badImage(err, "config")
	}
	for _, d := range cf.RootFS.DiffIDs {
		if d.Algorithm != "sha256" || len(d.Hex) != 64 {
			return nil, errdefs.New(api.CodeImageDamaged, "image config: diff id %s is not a sha256", d)
		}
	}
	return cf, nil
}
