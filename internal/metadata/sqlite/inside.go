package sqlite

import (
	"context"
	"fmt"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The columns of a sandbox's InsidePolicy (migration 0008), at the end of
// sandboxColumns, with the helpers that write and read them in that order.
const (
	insideColumns      = `inside_memory, inside_names, inside_per_minute, inside_keep`
	insidePlaceholders = `?, ?, ?, ?`
)

func insideValues(p metadata.InsidePolicy) []any {
	return []any{p.Memory, p.Names, p.PerMinute, p.Keep}
}

func insideDests(p *metadata.InsidePolicy) []any {
	return []any{&p.Memory, &p.Names, &p.PerMinute, &p.Keep}
}

// SetInsidePolicy implements metadata.Store.
func (s *Store) SetInsidePolicy(ctx context.Context, sandboxID string, p metadata.InsidePolicy) error {
	what := fmt.Sprintf("metadata: set inside policy of sandbox %s to %+v", sandboxID, p)
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET inside_memory = ?, inside_names = ?,
		inside_per_minute = ?, inside_keep = ?, updated_at = ? WHERE id = ?`,
		append(insideValues(p), formatTime(s.now()), sandboxID)...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}
