package server

import (
	"net/http"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

func (s *Server) getInfo(w http.ResponseWriter, r *http.Request) error {
	info := s.info
	info.Account = s.account(r)
	if s.fingerprint != nil && info.Listen != "" {
		// The certificate served now: a renewal shows at once.
		info.TLSFingerprint = s.fingerprint()
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) error {
	imgs, err := s.images.List()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, imgs)
	return nil
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) error {
	img, err := s.images.Info(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, img)
	return nil
}

func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) error {
	if err := s.images.Delete(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
	return nil
}

// pullImage starts a pull (202 and the operation; its result is the
// Image).
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) error {
	var req api.PullImageRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Ref == "" {
		return errdefs.New(api.CodeInvalidArgument, "pull needs a reference (ref), such as python:3.12 or registry.example.com/team/app:1")
	}
	noteTarget(r, req.Name, "from "+req.Ref)
	op, err := s.images.Pull(r.Context(), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

// importImage receives an image archive as the request body (a tar, or
// gzip of one: Content-Type application/x-tar or application/gzip) and
// starts importing it as ?name=NAME (202 and the operation; its result
// is the Image). The body may take as long as it takes.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) error {
	name, source := r.URL.Query().Get("name"), r.URL.Query().Get("source")
	if name == "" {
		return errdefs.New(api.CodeInvalidArgument, "import needs the image's name (?name=NAME)")
	}
	if source == "" {
		source = "upload"
	}
	if len(source) > 255 {
		source = source[:255]
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	noteTarget(r, name, "from "+source)
	op, err := s.images.Import(r.Context(), r.Body, name, source)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

// pruneImages empties the layer cache.
func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) error {
	res, err := s.images.PruneCache(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	list, err := s.views.List(r.Context(), s.account(r), r.URL.Query().Get("parent"))
	if err != nil {
		return err
	}
	if labels := r.URL.Query()["label"]; len(labels) > 0 {
		kept := list[:0]
		for _, sb := range list {
			if api.LabelFilter(sb.Labels, labels) {
				kept = append(kept, sb)
			}
		}
		list = kept
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateSandboxRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	noteTarget(r, req.Name, "")
	op, err := s.sandboxes.Create(r.Context(), s.account(r), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.views.Info(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sb)
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	op, err := s.sandboxes.Delete(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) error {
	op, err := s.sandboxes.Start(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.StopRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.sandboxes.Stop(r.Context(), s.account(r), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) restartSandbox(w http.ResponseWriter, r *http.Request) error {
	op, err := s.sandboxes.Restart(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

func (s *Server) listOperations(w http.ResponseWriter, r *http.Request) error {
	all := s.ops.List()
	mine := make([]api.Operation, 0, len(all))
	for _, op := range all {
		if s.seesOperation(r, op.ID) {
			mine = append(mine, op)
		}
	}
	writeJSON(w, http.StatusOK, mine)
	return nil
}

// seesOperation reports whether r may see operation id: the unix socket
// (the host's administrator) sees every one, a token its account's.
func (s *Server) seesOperation(r *http.Request, id string) bool {
	c := credential(r)
	return c.TokenID == "" || s.accountOps.ownedBy(id, c.Account)
}

// operation returns operation id if r may see it; O01, as for one that
// does not exist, otherwise.
func (s *Server) operation(r *http.Request, id string) (*operation.Op, error) {
	if !s.seesOperation(r, id) {
		return nil, errdefs.New(api.CodeNoOperation, "no operation %q", id)
	}
	return s.ops.Get(id)
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request) error {
	op, err := s.operation(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, op.Info())
	return nil
}

// operationEvents streams an operation's events as NDJSON.
func (s *Server) operationEvents(w http.ResponseWriter, r *http.Request) error {
	op, err := s.operation(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.streamEvents(w, r, op)
}

func (s *Server) listServices(w http.ResponseWriter, r *http.Request) error {
	list, err := s.processes.Services(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.ServiceStatus{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// serviceLogs answers the end of a service's log as plain text
// (?tail_bytes=N, default 64 KiB, at most 1 MiB; more is refused).
func (s *Server) serviceLogs(w http.ResponseWriter, r *http.Request) error {
	tail := 0
	if v := r.URL.Query().Get("tail_bytes"); v != "" {
		n, err := bounds.ParseInt("tail_bytes", v, 0, api.MaxLogTail)
		if err != nil {
			return err
		}
		tail = int(n)
	}
	b, err := s.processes.ServiceLogs(r.Context(), s.account(r), r.PathValue("name"), r.PathValue("service"), tail)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
	return nil
}
