package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Images (migration 0016).

const imageColumns = `name, digest, source, config, size_bytes, disk_path, created_at`

// CreateImage implements metadata.Store.
func (s *Store) CreateImage(ctx context.Context, img metadata.Image) error {
	what := fmt.Sprintf("metadata: create image %q", img.Name)
	if err := img.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	config, err := json.Marshal(img.Config)
	if err != nil {
		return fmt.Errorf("%s: config: %w", what, err)
	}
	_, err = s.exec(ctx, `INSERT INTO images (`+imageColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		img.Name, img.Digest, img.Source, string(config), img.SizeBytes, img.DiskPath, s.stamp(img.CreatedAt))
	if _, unique := violated(err); unique {
		return fmt.Errorf("%s: name: %w", what, metadata.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Image implements metadata.Store.
func (s *Store) Image(ctx context.Context, name string) (metadata.Image, error) {
	imgs, err := s.images(ctx, `WHERE name = $1`, name)
	if err == nil && len(imgs) == 0 {
		err = metadata.ErrNotFound
	}
	if err != nil {
		return metadata.Image{}, fmt.Errorf("metadata: image %q: %w", name, err)
	}
	return imgs[0], nil
}

// ImagesByDigest implements metadata.Store.
func (s *Store) ImagesByDigest(ctx context.Context, digest string) ([]metadata.Image, error) {
	imgs, err := s.images(ctx, `WHERE digest = $1 ORDER BY name`, digest)
	if err != nil {
		return nil, fmt.Errorf("metadata: images of digest %s: %w", digest, err)
	}
	return imgs, nil
}

// Images implements metadata.Store.
func (s *Store) Images(ctx context.Context) ([]metadata.Image, error) {
	imgs, err := s.images(ctx, `ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("metadata: list images: %w", err)
	}
	return imgs, nil
}

// images runs SELECT … FROM images with the rest of the query given. The
// result is empty, never nil.
func (s *Store) images(ctx context.Context, rest string, args ...any) ([]metadata.Image, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+imageColumns+` FROM images `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []metadata.Image{}
	for rows.Next() {
		var (
			img     metadata.Image
			config  string
			created time.Time
		)
		if err := rows.Scan(&img.Name, &img.Digest, &img.Source, &config, &img.SizeBytes, &img.DiskPath, &created); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(config), &img.Config); err != nil {
			return nil, fmt.Errorf("image %q: stored config: %w", img.Name, err)
		}
		img.CreatedAt = created.UTC()
		out = append(out, img)
	}
	return out, rows.Err()
}

// DeleteImage implements metadata.Store.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	return s.execOne(ctx, fmt.Sprintf("metadata: delete image %q", name), `DELETE FROM images WHERE name = $1`, name)
}

// ImageUsers implements metadata.Store.
func (s *Store) ImageUsers(ctx context.Context, name string) (sandboxes, checkpoints int, err error) {
	// One statement, so both counts are of the same snapshot.
	err = s.db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM sandboxes WHERE image = $1),
		(SELECT COUNT(*) FROM checkpoints WHERE image = $1)`, name).Scan(&sandboxes, &checkpoints)
	if err != nil {
		return 0, 0, fmt.Errorf("metadata: users of image %q: %w", name, err)
	}
	return sandboxes, checkpoints, nil
}
