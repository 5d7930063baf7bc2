package server

import (
	"net/http"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
)

// createCheckpoint streams the checkpoint's progress as NDJSON, ending in a
// complete event carrying the checkpoint, unless the client asks for JSON
// (then: 202 and an operation, as for other long work).
func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateCheckpointRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.CreateCheckpoint(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		return s.accepted(w, r, op)
	}
	s.accountOps.add(op.Info().ID, s.account(r), s.ops)
	if n := noteFrom(r); n != nil {
		n.operation = op.Info().ID
	}
	return s.streamEvents(w, r, op)
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	list, err := s.checkpoints.Checkpoints(r.Context(), s.account(r), r.PathValue("name"), r.URL.Query().Get("include_auto") == "true")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	ck, err := s.checkpoints.Checkpoint(r.Context(), s.account(r), r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ck)
	return nil
}

func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) error {
	name, id := r.PathValue("name"), r.PathValue("id")
	if err := s.checkpoints.DeleteCheckpoint(r.Context(), s.account(r), name, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": name + "/" + id})
	return nil
}

// keepCheckpoint makes a checkpoint made from inside the sandbox one the
// operator keeps; the management socket has no such route.
func (s *Server) keepCheckpoint(w http.ResponseWriter, r *http.Request) error {
	ck, err := s.checkpoints.KeepCheckpoint(r.Context(), s.account(r), r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ck)
	return nil
}

// evictCheckpoint drops a checkpoint's local copy (it restores from
// off-site from then on).
func (s *Server) evictCheckpoint(w http.ResponseWriter, r *http.Request) error {
	ck, err := s.checkpoints.EvictCheckpoint(r.Context(), s.account(r), r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ck)
	return nil
}

func (s *Server) restoreCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req api.RestoreRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.Restore(r.Context(), s.account(r), r.PathValue("name"), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req api.SnapshotRestoreRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	op, err := s.rewinds.RestoreSnapshot(r.Context(), s.account(r), r.PathValue("ref"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.ForkRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.Fork(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) diffSandbox(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	diff, err := s.checkpoints.Diff(r.Context(), s.account(r), r.PathValue("name"), q.Get("from"), q.Get("to"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, diff)
	return nil
}

func (s *Server) diffFile(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	diff, err := s.checkpoints.DiffFile(r.Context(), s.account(r), r.PathValue("name"), q.Get("from"), q.Get("to"), q.Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, diff)
	return nil
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateCheckpointRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.CreateSnapshot(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	list, err := s.checkpoints.Snapshots(r.Context(), s.account(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	ck, err := s.checkpoints.DeleteSnapshot(r.Context(), s.account(r), r.PathValue("ref"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ck)
	return nil
}

func (s *Server) configureSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.ConfigureSandboxRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	sb, err := s.sandboxes.Configure(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sb)
	return nil
}

func (s *Server) getAccount(w http.ResponseWriter, r *http.Request) error {
	info, err := s.accounts.Account(r.Context(), s.account(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) offsiteCheckpoints(w http.ResponseWriter, r *http.Request) error {
	list, err := s.accounts.OffsiteCheckpoints(r.Context(), s.account(r))
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.RemoteCheckpoint{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) importOffsite(w http.ResponseWriter, r *http.Request) error {
	var req api.ImportRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	res, err := s.accounts.ImportOffsite(r.Context(), s.account(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) error {
	var req api.VerifyRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.accounts.Verify(r.Context(), s.account(r), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}
