package cli

import (
	"bytes"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestPrintVerifyReport(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  api.VerifyReport
		want string
	}{
		{"local intact", api.VerifyReport{Checkpoints: 3, OK: true}, "3 checkpoints checked: intact\n"},
		{"local gone", api.VerifyReport{Checkpoints: 2, Problems: []string{"web/v0: the local disk is gone (restore it from off-site)"}},
			"2 checkpoints checked: 1 problems\n  web/v0: the local disk is gone (restore it from off-site)\n"},
		{"offsite", api.VerifyReport{OK: false, Locations: []api.LocationReport{
			{Name: "east", Objects: 12, Bytes: 3 << 20, Problems: []string{"packs/ab: authentication failed"}, Repaired: []string{"packs/ab"}, OK: true},
			{Name: "west", Objects: 12, Bytes: 3 << 20, OK: true},
			{Name: "north", Error: "connection refused"},
		}}, "" +
			"east: 12 objects, 3MiB: 1 problems, repaired (1 objects copied from the other location)\n" +
			"  packs/ab: authentication failed\n" +
			"west: 12 objects, 3MiB: intact\n" +
			"north: 0 objects, 0B: not verified: connection refused\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			g := newGlobalOptions(nil, &out, &out)
			printVerifyReport(g, tc.rep)
			if out.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}
