// Package envcli is cairn-env, the in-sandbox command line: it talks to the
// sandbox's management socket (/.cairn/api.sock, docs/sandbox-api.md) and
// nothing else.
package envcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// DefaultSocket is the management socket inside every sandbox.
const DefaultSocket = "/.cairn/api.sock"

const usage = `cairn-env: checkpoints of this sandbox, from inside it.

Usage:
  cairn-env checkpoints create [--comment TEXT] [--label TEXT]
  cairn-env checkpoints list [--include-auto]
  cairn-env checkpoints info ID
  cairn-env checkpoints restore ID [--no-safety-checkpoint]

Every command takes --json. A restore ends every process in this sandbox,
this one included; the sandbox then comes back with the checkpoint's disk
and its services started. See /.cairn/llm.txt.
`

// Main runs cairn-env with args and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	socket := os.Getenv("CAIRN_API_SOCKET")
	if socket == "" {
		socket = DefaultSocket
	}
	c := &client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] != "checkpoints" && args[0] != "checkpoint" || len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	verb, rest := args[1], args[2:]
	fs := flag.NewFlagSet("cairn-env "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	comment := fs.String("comment", "", "comment of the new checkpoint")
	label := fs.String("label", "", "label of the new checkpoint")
	includeAuto := fs.Bool("include-auto", false, "list automatic checkpoints too")
	noSafety := fs.Bool("no-safety-checkpoint", false, "restore without first checkpointing the current state")
	// Flags may come after the positional ID.
	var pos []string
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
	}
	out := &printer{stdout: stdout, stderr: stderr, json: *asJSON}
	ctx := context.Background()
	var err error
	switch verb {
	case "create":
		err = c.create(ctx, out, api.CreateCheckpointRequest{Comment: *comment, Label: *label})
	case "list", "ls":
		err = c.list(ctx, out, *includeAuto)
	case "info", "get":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "cairn-env checkpoints info ID")
			return 2
		}
		err = c.info(ctx, out, pos[0])
	case "restore":
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "cairn-env checkpoints restore ID")
			return 2
		}
		err = c.restore(ctx, out, pos[0], *noSafety)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		out.fail(err)
		return 1
	}
	return 0
}

// apiError is an error answered by the socket.
type apiError struct{ api.ErrorInfo }

func (e *apiError) Error() string { return fmt.Sprintf("error %s: %s", e.Code, e.Message) }

type printer struct {
	stdout, stderr io.Writer
	json           bool
}

func (p *printer) fail(err error) {
	var ae *apiError
	if p.json {
		info := api.ErrorInfo{Message: err.Error()}
		if errors.As(err, &ae) {
			info = ae.ErrorInfo
		}
		json.NewEncoder(p.stdout).Encode(api.ErrorBody{Error: info})
		return
	}
	if errors.As(err, &ae) {
		fmt.Fprintln(p.stderr, ae.Error())
		return
	}
	fmt.Fprintln(p.stderr, "error:", err)
}

func (p *printer) emitJSON(v any) {
	enc := json.NewEncoder(p.stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

type client struct{ http *http.Client }

func (c *client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://cairn"+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s (is this a cairn sandbox?): %w", DefaultSocket, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var eb api.ErrorBody
		if json.NewDecoder(resp.Body).Decode(&eb) != nil || eb.Error.Code == "" {
			return nil, fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		return nil, &apiError{eb.Error}
	}
	return resp, nil
}

func (c *client) get(ctx context.Context, path string, out any) error {
	resp, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *client) create(ctx context.Context, p *printer, req api.CreateCheckpointRequest) error {
	resp, err := c.send(ctx, "POST", "/v1/checkpoint", req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("bad progress line: %w", err)
		}
		switch ev.Type {
		case api.EventComplete:
			var ck api.Checkpoint
			if err := json.Unmarshal(ev.Data, &ck); err != nil {
				return err
			}
			if p.json {
				p.emitJSON(ck)
			} else {
				fmt.Fprintf(p.stdout, "Checkpoint created: %s\n", ck.ID)
			}
			return nil
		case api.EventError:
			var info api.ErrorInfo
			json.Unmarshal(ev.Data, &info)
			return &apiError{info}
		default:
			if !p.json {
				var msg string
				json.Unmarshal(ev.Data, &msg)
				fmt.Fprintln(p.stderr, msg)
			}
		}
	}
	return errors.New("the progress stream ended before the checkpoint did")
}

func (c *client) list(ctx context.Context, p *printer, includeAuto bool) error {
	path := "/v1/checkpoints"
	if includeAuto {
		path += "?include_auto=true"
	}
	var cks []api.Checkpoint
	if err := c.get(ctx, path, &cks); err != nil {
		return err
	}
	if p.json {
		if cks == nil {
			cks = []api.Checkpoint{}
		}
		p.emitJSON(cks)
		return nil
	}
	tw := tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tTRIGGER\tCONSISTENCY\tCOMMENT")
	for _, ck := range cks {
		id := ck.ID
		if ck.Current {
			id += "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, ck.CreatedAt.Local().Format(time.DateTime), ck.Trigger, ck.Consistency, ck.Comment)
	}
	return tw.Flush()
}

func (c *client) info(ctx context.Context, p *printer, id string) error {
	var ck api.Checkpoint
	if err := c.get(ctx, "/v1/checkpoints/"+url.PathEscape(id), &ck); err != nil {
		return err
	}
	if p.json {
		p.emitJSON(ck)
		return nil
	}
	tw := tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", ck.ID}, {"created", ck.CreatedAt.Local().Format(time.DateTime)}, {"trigger", ck.Trigger},
		{"consistency", ck.Consistency}, {"comment", ck.Comment}, {"label", ck.Label},
		{"browse", "/.cairn/checkpoints/" + ck.ID + " (while among the five newest)"},
	} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
	}
	return tw.Flush()
}

func (c *client) restore(ctx context.Context, p *printer, id string, noSafety bool) error {
	resp, err := c.send(ctx, "POST", "/v1/checkpoints/"+url.PathEscape(id)+"/restore", api.RestoreRequest{NoSafetyCheckpoint: noSafety})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var op api.Operation
	if err := json.NewDecoder(resp.Body).Decode(&op); err != nil {
		return err
	}
	if p.json {
		p.emitJSON(op)
	} else {
		fmt.Fprintln(p.stdout, strings.TrimSpace(fmt.Sprintf(
			"Restore to %s started (operation %s): this sandbox stops in a second and comes back restored.", id, op.ID)))
	}
	return nil
}
