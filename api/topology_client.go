package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	courier "github.com/courier-gw/courier"
)

// Topology returns every object of the topology in the file's form, and
// its version.
func (c *Client) Topology(ctx context.Context) (*Topology, error) {
	return request[Topology](ctx, c, http.MethodGet, "/v1/topology", nil)
}

// Object returns one endpoint, route, policy or subscription.
func (c *Client) Object(ctx context.Context, kind courier.TopologyKind, name string) (*TopologyObject, error) {
	if kind == courier.KindEndpoint {
		e, err := c.Endpoint(ctx, name)
		if err != nil {
			return nil, err
		}
		return &TopologyObject{Kind: kind, Name: name, Spec: json.RawMessage(e.Spec), Version: e.Version, UpdatedAt: e.UpdatedAt, UpdatedBy: e.UpdatedBy}, nil
	}
	return request[TopologyObject](ctx, c, http.MethodGet, objectPath(kind, name), nil)
}

// Objects returns every object of a kind (policies, subscriptions or
// keys), by name.
func (c *Client) Objects(ctx context.Context, kind courier.TopologyKind) ([]TopologyObject, error) {
	out, err := request[ObjectList](ctx, c, http.MethodGet, "/v1/"+kind.Section(), nil)
	if err != nil {
		return nil, err
	}
	return out.Objects, nil
}

// PutObject creates or replaces an object; ifMatch, when not negative, is
// the version it must have (0: it must not exist yet). created tells a new
// object (201) from a replaced or unchanged one.
func (c *Client) PutObject(ctx context.Context, kind courier.TopologyKind, name string, spec json.RawMessage, ifMatch int64) (*TopologyObject, bool, error) {
	out := new(TopologyObject)
	status, err := c.doWith(ctx, http.MethodPut, objectPath(kind, name), conditional(ifMatch), spec, out)
	if err != nil {
		return nil, false, err
	}
	return out, status == http.StatusCreated, nil
}

// DeleteObject removes an object; ifMatch as for PutObject.
func (c *Client) DeleteObject(ctx context.Context, kind courier.TopologyKind, name string, ifMatch int64) error {
	_, err := c.doWith(ctx, http.MethodDelete, objectPath(kind, name), conditional(ifMatch), nil, nil)
	return err
}

// Apply makes the server's topology hold t's objects (with prune, only
// them) and returns what it changed, or with dryRun what it would change.
func (c *Client) Apply(ctx context.Context, t Topology, prune, dryRun bool) (*ApplyResult, error) {
	q := url.Values{}
	if prune {
		q.Set("prune", "true")
	}
	if dryRun {
		q.Set("dry_run", "true")
	}
	path := "/v1/topology"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return request[ApplyResult](ctx, c, http.MethodPut, path, t)
}

// RotateSecrets has the server seal every stored secret under its current
// key, and reports how many objects it wrote.
func (c *Client) RotateSecrets(ctx context.Context) (int, error) {
	var out struct {
		Rotated int `json:"rotated"`
	}
	_, err := c.do(ctx, http.MethodPost, "/v1/topology/rotate-secrets", nil, &out)
	return out.Rotated, err
}

// Audit returns one page of the audit log, newest first.
func (c *Client) Audit(ctx context.Context, f courier.AuditFilter) (*AuditPage, error) {
	path := listPath("/v1/audit", map[string]string{"who": f.Who, "action": string(f.Kind), "object": string(f.Object),
		"subject": f.Subject, "cursor": f.Cursor}, f.Limit, map[string]time.Time{"since": f.Since, "until": f.Until})
	return request[AuditPage](ctx, c, http.MethodGet, path, nil)
}

// listPath is the path of a listing with the query of its filter: the
// parameters, times and limit that are set.
func listPath(path string, params map[string]string, limit int, times map[string]time.Time) string {
	q := url.Values{}
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, t := range times {
		if !t.IsZero() {
			q.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func objectPath(kind courier.TopologyKind, name string) string {
	return "/v1/" + kind.Section() + "/" + url.PathEscape(name)
}

func conditional(ifMatch int64) http.Header {
	switch {
	case ifMatch == 0:
		return http.Header{"If-None-Match": {"*"}}
	case ifMatch > 0:
		return http.Header{"If-Match": {strconv.Quote(strconv.FormatInt(ifMatch, 10))}}
	}
	return nil
}
