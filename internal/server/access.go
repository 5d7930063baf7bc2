package server

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Access is the accounts and API tokens (package access). Only admin
// tokens reach it (adminRoutes), but whoami.
type Access interface {
	// CreateAccount makes an account. V01, V02, A08.
	CreateAccount(ctx context.Context, name string, diskLimit int64) (api.AccountRecord, error)
	// Accounts lists every account.
	Accounts(ctx context.Context) ([]api.AccountRecord, error)
	// SetDiskLimit sets an account's disk limit. V02, A04.
	SetDiskLimit(ctx context.Context, name string, bytes int64) (api.AccountRecord, error)
	// DeleteAccount deletes an account that holds nothing, with its
	// tokens. A04, A05, V02 (the default account).
	DeleteAccount(ctx context.Context, name string) error
	// PurgeAccount starts an operation that revokes the account's
	// tokens, deletes everything it holds (sandboxes, stopped first;
	// checkpoints and snapshots with their off-site copies) and then the
	// account; it completes with an api.AccountDeleted. A failure ends
	// the operation with what is left still there, and running it again
	// finishes. A04, V02 (the default account).
	PurgeAccount(ctx context.Context, name string) (*operation.Op, error)
	// CreateToken makes a token of account; ttl 0: it never expires.
	// V01, V02, A04, A07.
	CreateToken(ctx context.Context, account, name string, role auth.Role, ttl time.Duration) (api.NewToken, error)
	// Tokens lists account's tokens ("": every account's). A04.
	Tokens(ctx context.Context, account string) ([]api.Token, error)
	// RevokeToken revokes a token. A06.
	RevokeToken(ctx context.Context, id string) (api.Token, error)
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	c := credential(r)
	via := "https"
	if c.TokenID == "" {
		via = "unix socket"
	}
	writeJSON(w, http.StatusOK, api.Whoami{Account: c.Account, Role: string(c.Role), TokenID: c.TokenID, TokenName: c.TokenName, Via: via})
	return nil
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request) error {
	list, err := s.access.Accounts(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// diskLimit parses an account's disk limit ("" and "0": the host's
// default).
func diskLimit(s string) (int64, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	return bounds.ParseSize("disk_limit", s, 64<<20, math.MaxInt64)
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateAccountRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	limit, err := diskLimit(req.DiskLimit)
	if err != nil {
		return err
	}
	noteTarget(r, req.Name, "")
	acct, err := s.access.CreateAccount(r.Context(), req.Name, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, acct)
	return nil
}

func (s *Server) setAccount(w http.ResponseWriter, r *http.Request) error {
	var req api.SetAccountRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.DiskLimit == nil {
		return errdefs.New(api.CodeInvalidArgument, "nothing to change: give disk_limit")
	}
	limit, err := diskLimit(*req.DiskLimit)
	if err != nil {
		return err
	}
	acct, err := s.access.SetDiskLimit(r.Context(), r.PathValue("name"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, acct)
	return nil
}

// deleteAccount deletes an empty account; with ?force=true, one that
// holds anything, as an operation.
func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var force bool
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		return errdefs.New(api.CodeInvalidArgument, "invalid force %q: want true or false", v)
	}
	if force {
		noteTarget(r, "", "force")
		if c := credential(r); c.TokenID != "" && c.Account == name {
			return errdefs.New(api.CodeInvalidArgument, "a token cannot force the delete of its own account %s: use an admin token of another account, or the unix socket", name)
		}
		op, err := s.access.PurgeAccount(r.Context(), name)
		if err != nil {
			return err
		}
		// Its tokens are revoked as the operation starts: their sessions
		// end now.
		s.endAccountSessions(name)
		return s.accepted(w, r, op)
	}
	if err := s.access.DeleteAccount(r.Context(), name); err != nil {
		return err
	}
	s.endAccountSessions(name) // its tokens went with it
	writeJSON(w, http.StatusOK, map[string]string{"deleted": name})
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	list, err := s.access.Tokens(r.Context(), r.URL.Query().Get("account"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// maxTokenLife bounds a token's --expires.
const maxTokenLife = 10 * 365 * 24 * time.Hour

// parseExpiry parses a token's lifetime: a Go duration, or a number of
// days ("30d").
func parseExpiry(s string) (time.Duration, error) {
	if s == "" || s == "never" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 3650 {
			return 0, errdefs.New(api.CodeInvalidArgument, "expires %q: a number of days from 1 to 3650 (\"30d\"), or a duration (\"12h\")", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return bounds.ParseDuration("expires", s, time.Minute, maxTokenLife, time.Second)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateTokenRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Account == "" {
		req.Account = s.account(r)
	}
	if req.Role == "" {
		req.Role = string(auth.RoleMember)
	}
	ttl, err := parseExpiry(req.Expires)
	if err != nil {
		return err
	}
	noteTarget(r, "", "account "+req.Account+", name "+req.Name+", role "+req.Role)
	tok, err := s.access.CreateToken(r.Context(), req.Account, req.Name, auth.Role(req.Role), ttl)
	if err != nil {
		return err
	}
	noteTarget(r, tok.Info.ID, "account "+req.Account+", name "+req.Name+", role "+req.Role)
	writeJSON(w, http.StatusCreated, tok)
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	tok, err := s.access.RevokeToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.endSessions(tok.ID) // its exec sessions, connections, streams: now
	writeJSON(w, http.StatusOK, tok)
	return nil
}
