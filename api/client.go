package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// Client calls a courier server's API. Errors the server answers are
// *courier.Error values with the server's code and message.
type Client struct {
	base   string
	http   *http.Client
	token  string
	tenant string // the tenant named in every path; empty: the key's own
}

// NewClient returns a client for the server at base ("http://127.0.0.1:8425"
// or just "127.0.0.1:8425"). token, if not empty, is sent as a bearer token.
func NewClient(base, token string) *Client {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{
		base:  strings.TrimRight(base, "/"),
		http:  &http.Client{Timeout: 60 * time.Second},
		token: token,
	}
}

// InTenant returns a client that acts in the named tenant: each request's
// path names it (/v1/tenants/{tenant}/...), as a key of the system tenant
// does to reach a tenant's objects and messages. An empty tenant acts in
// the key's own.
func (c *Client) InTenant(tenant string) *Client {
	out := *c
	out.tenant = tenant
	return &out
}

// url is where a request for an API path goes.
func (c *Client) url(path string) string {
	if c.tenant != "" && strings.HasPrefix(path, "/v1/") {
		path = tenantsPrefix + url.PathEscape(c.tenant) + "/" + strings.TrimPrefix(path, "/v1/")
	}
	return c.base + path
}

// Ingest sends one message. With an id it is a PUT (idempotent), without one
// a POST. created tells a new message (201) from an existing one (200).
func (c *Client) Ingest(ctx context.Context, req IngestRequest) (m *Message, created bool, err error) {
	method, path := http.MethodPost, "/v1/messages"
	if req.ID != "" {
		method, path = http.MethodPut, "/v1/messages/"+url.PathEscape(req.ID)
	}
	m = new(Message)
	status, err := c.do(ctx, method, path, req, m)
	if err != nil {
		return nil, false, err
	}
	return m, status == http.StatusCreated, nil
}

// IngestRaw sends one message whose payload is body, size bytes (-1 when
// unknown), streamed as the body itself of a PUT: the way to send a payload
// of any size up to max_payload. req gives the other fields (its Payload
// fields are not used) and must have an id.
func (c *Client) IngestRaw(ctx context.Context, req IngestRequest, body io.Reader, size int64) (m *Message, created bool, err error) {
	if req.ID == "" {
		return nil, false, courier.Errorf(courier.CodeInvalidArgument, "a message sent raw needs an id")
	}
	h := http.Header{}
	h.Set(HeaderType, req.Type)
	set := func(k, v string) {
		if v != "" {
			h.Set(k, v)
		}
	}
	set(HeaderRoute, req.Route)
	set(HeaderOrderingKey, req.OrderingKey)
	set(HeaderRecipient, req.Recipient)
	set("Content-Type", req.ContentType)
	if req.Priority != nil {
		h.Set(HeaderPriority, strconv.Itoa(*req.Priority))
	}
	if req.DeliverAfter != nil {
		h.Set(HeaderDeliverAfter, req.DeliverAfter.Format(time.RFC3339Nano))
	}
	if req.ExpiresAt != nil {
		h.Set(HeaderExpiresAt, req.ExpiresAt.Format(time.RFC3339Nano))
	}
	for k, v := range req.Headers {
		h.Set(HeaderPrefix+k, v)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPut, c.url("/v1/messages/"+url.PathEscape(req.ID)), body)
	if err != nil {
		return nil, false, err
	}
	r.ContentLength = size
	r.Header = h
	m = new(Message)
	status, err := c.send(r, m)
	if err != nil {
		return nil, false, err
	}
	return m, status == http.StatusCreated, nil
}

// IngestBatch sends many messages in one request.
func (c *Client) IngestBatch(ctx context.Context, reqs []IngestRequest) ([]BatchResult, error) {
	items := make([]json.RawMessage, len(reqs))
	for i, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode message %d: %w", i, err)
		}
		items[i] = b
	}
	var out BatchResponse
	if _, err := c.do(ctx, http.MethodPost, "/v1/messages/batch", BatchRequest{Messages: items}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// messagePath is the path of a message, or of one delivery of a published
// message given by its key ("id/subscription", as courier.Message.Key).
func messagePath(key string) string {
	id, sub := courier.ParseKey(key)
	if sub == "" {
		return "/v1/messages/" + url.PathEscape(id)
	}
	return "/v1/messages/" + url.PathEscape(id) + "/deliveries/" + url.PathEscape(sub)
}

// Message returns one message with its payload: a published one with its
// deliveries, or one delivery of it when key is "id/subscription".
func (c *Client) Message(ctx context.Context, key string) (*Message, error) {
	return request[Message](ctx, c, http.MethodGet, messagePath(key), nil)
}

// StoredMessage is Message, but with the payload as stored, in
// PayloadBase64: the JSON form of a JSON payload is encoded anew
// (compacted), which a preview must not show for the payload.
func (c *Client) StoredMessage(ctx context.Context, key string) (*Message, error) {
	return request[Message](ctx, c, http.MethodGet, messagePath(key)+"?payload=base64", nil)
}

// Payload returns a message's payload as it was given, streamed (GET
// /v1/messages/{id}/payload): the caller reads and closes it. The answer's
// header has its Content-Type, Content-Length and HeaderSHA256.
func (c *Client) Payload(ctx context.Context, id string) (io.ReadCloser, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/v1/messages/"+url.PathEscape(id)+"/payload"), nil)
	if err != nil {
		return nil, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, courier.Unavailable("the courier server at "+c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return nil, nil, &courier.Error{Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return nil, nil, courier.Errorf(courier.CodeInternal, "GET payload of %s: HTTP %d", id, resp.StatusCode)
	}
	return resp.Body, resp.Header, nil
}

// Attempts returns the attempts of a message (of every delivery of a
// published one), or of one delivery, oldest first.
func (c *Client) Attempts(ctx context.Context, key string) ([]Attempt, error) {
	out, err := request[AttemptList](ctx, c, http.MethodGet, messagePath(key)+"/attempts", nil)
	if err != nil {
		return nil, err
	}
	return out.Attempts, nil
}

// Messages returns one page of a listing.
func (c *Client) Messages(ctx context.Context, f courier.MessageFilter) (*MessageList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", string(f.State))
	set("type", f.Type)
	set("route", f.Route)
	set("endpoint", f.Endpoint)
	set("subscription", f.Subscription)
	set("reason", string(f.Reason))
	set("id_prefix", f.IDPrefix)
	set("routes", strings.Join(f.Routes, ","))
	set("cursor", f.Cursor)
	if f.Limit > 0 {
		set("limit", fmt.Sprint(f.Limit))
	}
	if !f.CreatedAfter.IsZero() {
		set("created_after", f.CreatedAfter.Format(time.RFC3339Nano))
	}
	if !f.CreatedBefore.IsZero() {
		set("created_before", f.CreatedBefore.Format(time.RFC3339Nano))
	}
	path := "/v1/messages"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return request[MessageList](ctx, c, http.MethodGet, path, nil)
}

// Resubmit puts a suspended message (or delivery, by its key) back in the
// queue, optionally on another route.
func (c *Client) Resubmit(ctx context.Context, key, route string) (*Message, error) {
	return request[Message](ctx, c, http.MethodPost, messagePath(key)+"/resubmit", ResubmitRequest{Route: route})
}

// Discard gives a queued or suspended message (or delivery, by its key) up.
func (c *Client) Discard(ctx context.Context, key string) (*Message, error) {
	return request[Message](ctx, c, http.MethodPost, messagePath(key)+"/discard", nil)
}

// Erase erases the payload of message id (of every delivery of a published
// one) on request, for reason, and returns the message with its tombstone.
func (c *Client) Erase(ctx context.Context, id, reason string) (*Message, error) {
	return request[Message](ctx, c, http.MethodPost, messagePath(id)+"/erase", EraseRequest{Reason: reason})
}

// Types returns the catalog of message types taken in.
func (c *Client) Types(ctx context.Context) ([]TypeView, error) {
	out, err := request[TypeList](ctx, c, http.MethodGet, "/v1/types", nil)
	if err != nil {
		return nil, err
	}
	return out.Types, nil
}

// Replay starts a replay for subscription name and returns the operation
// at once; Operation tells how far it got.
func (c *Client) Replay(ctx context.Context, name string, req ReplayRequest) (*Operation, error) {
	return request[Operation](ctx, c, http.MethodPost, "/v1/subscriptions/"+url.PathEscape(name)+"/replay", req)
}

// Resend delivers a finished message (or delivery, by its key) again.
func (c *Client) Resend(ctx context.Context, key string) (*Message, error) {
	return request[Message](ctx, c, http.MethodPost, messagePath(key)+"/resend", nil)
}

// Ready reports whether the server and its store answer.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
	return err
}

// do sends a request and decodes a 2xx answer into out; any other answer
// becomes a *courier.Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	return c.doWith(ctx, method, path, nil, in, out)
}

// doWith is do with headers of the caller's.
func (c *Client) doWith(ctx context.Context, method, path string, header http.Header, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return c.send(req, out)
}

// send sends a request with the client's key and decodes its 2xx answer
// into out (when not nil); any other answer is a *courier.Error.
func (c *Client) send(req *http.Request, out any) (int, error) {
	method, path := req.Method, req.URL.Path
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, courier.Unavailable("the courier server at "+c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, courier.Unavailable("the courier server at "+c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return resp.StatusCode, &courier.Error{Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return resp.StatusCode, courier.Errorf(courier.CodeInternal, "%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// request sends a request and returns its 2xx answer as a T; any other
// answer is a *courier.Error.
func request[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	out := new(T)
	if _, err := c.do(ctx, method, path, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Bulk resubmits (kind ActionResubmit) or discards (ActionDiscard) every
// message matching the request's filter, and returns the operation when it
// is done. With an OperationID the request may be repeated, and progress can
// be watched with Operation meanwhile.
func (c *Client) Bulk(ctx context.Context, kind courier.ActionKind, req BulkRequest) (*Operation, error) {
	return request[Operation](ctx, c, http.MethodPost, "/v1/messages/"+string(kind), req)
}

// Operation returns a bulk operation and how far it got.
func (c *Client) Operation(ctx context.Context, id string) (*Operation, error) {
	return request[Operation](ctx, c, http.MethodGet, "/v1/operations/"+url.PathEscape(id), nil)
}

// Tenants returns the tenants the key may see, with their use against
// their quotas.
func (c *Client) Tenants(ctx context.Context) (*TenantList, error) {
	return request[TenantList](ctx, c, http.MethodGet, "/v1/tenants", nil)
}

// Tenant returns one tenant's settings and use.
func (c *Client) Tenant(ctx context.Context, name string) (*TenantView, error) {
	return request[TenantView](ctx, c, http.MethodGet, "/v1/tenants/"+url.PathEscape(name), nil)
}

// PutTenant creates (true) or replaces a tenant's settings, with a key of
// the system tenant; ifMatch as for PutObject (0: create only).
func (c *Client) PutTenant(ctx context.Context, name string, spec TenantSpec, ifMatch int64) (*TopologyObject, bool, error) {
	out := new(TopologyObject)
	status, err := c.doWith(ctx, http.MethodPut, "/v1/tenants/"+url.PathEscape(name), conditional(ifMatch), spec, out)
	if err != nil {
		return nil, false, err
	}
	return out, status == http.StatusCreated, nil
}

// DeleteTenant deletes a tenant with everything it owns, with a key of the
// system tenant, and returns the operation that erases its messages: the
// system tenant's (InTenant(courier.SystemTenant).Operation follows it).
func (c *Client) DeleteTenant(ctx context.Context, name string) (*Operation, error) {
	return request[Operation](ctx, c, http.MethodDelete, "/v1/tenants/"+url.PathEscape(name), nil)
}

// Endpoints returns every configured endpoint with its health.
func (c *Client) Endpoints(ctx context.Context) ([]Endpoint, error) {
	out, err := request[EndpointList](ctx, c, http.MethodGet, "/v1/endpoints", nil)
	if err != nil {
		return nil, err
	}
	return out.Endpoints, nil
}

// Endpoint returns one endpoint with its health and operator actions.
func (c *Client) Endpoint(ctx context.Context, name string) (*Endpoint, error) {
	return request[Endpoint](ctx, c, http.MethodGet, "/v1/endpoints/"+url.PathEscape(name), nil)
}

// SwitchEndpoint switches an endpoint on or off.
func (c *Client) SwitchEndpoint(ctx context.Context, name string, on bool) (*Endpoint, error) {
	verb := "off"
	if on {
		verb = "on"
	}
	return request[Endpoint](ctx, c, http.MethodPost, "/v1/endpoints/"+url.PathEscape(name)+"/"+verb, nil)
}

// TestEndpoint sends a test message to an endpoint and returns what its
// receiver answered.
func (c *Client) TestEndpoint(ctx context.Context, name string, req EndpointTestRequest) (*EndpointTestResult, error) {
	return request[EndpointTestResult](ctx, c, http.MethodPost, "/v1/endpoints/"+url.PathEscape(name)+"/test", req)
}

// SwitchEndpoints switches on or off every endpoint the filter selects.
func (c *Client) SwitchEndpoints(ctx context.Context, on bool, f EndpointFilter) (*SwitchResult, error) {
	verb := "off"
	if on {
		verb = "on"
	}
	return request[SwitchResult](ctx, c, http.MethodPost, "/v1/endpoints/"+verb, SwitchRequest{Filter: f})
}

// NewClientWith returns a client that sends its requests with hc: another
// timeout, or a transport that hands them to a handler in the same process.
func NewClientWith(base, token string, hc *http.Client) *Client {
	c := NewClient(base, token)
	c.http = hc
	return c
}

// Stats returns the messages by state and this node's delivery rates.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	return request[Stats](ctx, c, http.MethodGet, "/v1/stats", nil)
}

// Routes returns the routes, endpoints and policies in force, secrets
// redacted.
func (c *Client) Routes(ctx context.Context) (*Config, error) {
	return request[Config](ctx, c, http.MethodGet, "/v1/routes", nil)
}
