package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// buildImage receives a build context as the request body (a tar) and
// starts building the image ?name= from it (202 and the operation; its
// result is the Image). The query: source, build_arg=K=V (repeated),
// network, no_cache, insecure, and each RUN step's bounds: memory (a
// size), cpus (a number), step_timeout (a duration), which cairnd checks
// against what it allows.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := api.BuildImageRequest{Name: q.Get("name"), Source: q.Get("source"), Network: q.Get("network"),
		Memory: q.Get("memory"), StepTimeout: q.Get("step_timeout")}
	if req.Name == "" {
		return errdefs.New(api.CodeInvalidArgument, "build needs the image's name (?name=NAME)")
	}
	if len(req.Source) > 255 {
		req.Source = req.Source[:255]
	}
	var err error
	if req.NoCache, err = queryBool(q, "no_cache"); err != nil {
		return err
	}
	if req.Insecure, err = queryBool(q, "insecure"); err != nil {
		return err
	}
	if v := q.Get("cpus"); v != "" {
		if req.CPUs, err = bounds.ParseFloat("cpus", v, api.MinCPUs, api.MaxCPUs, false); err != nil {
			return err
		}
	}
	for _, kv := range q["build_arg"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return errdefs.New(api.CodeInvalidArgument, "build_arg %q is not KEY=VALUE", kv)
		}
		if req.BuildArgs == nil {
			req.BuildArgs = map[string]string{}
		}
		req.BuildArgs[k] = v
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	noteTarget(r, req.Name, "")
	op, err := s.images.Build(r.Context(), r.Body, req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

// queryBool is the boolean ?name= of q: absent is false. V02 if it is
// not one.
func queryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.New(api.CodeInvalidArgument, "?%s=%q is not true or false", name, v)
	}
	return b, nil
}
