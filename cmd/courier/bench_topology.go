package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"io"
	"net/http"
	"net/url"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// The delivery benchmark's topology: with --topology file (the default) it
// is built in this process, as a configuration file gives it to the
// engine; with --topology store the server keeps it in the store and the
// benchmark creates it through the API before it sends anything (docs/design.md
// §15), the same objects written in the file's form.

// Where the delivery benchmark's topology lives.
const (
	topologyInFile  = "file"
	topologyInStore = "store"
)

// benchTopology is the topology of a delivery benchmark: its endpoints
// (one route each, bench-NN to receiver-NN) and subscriptions.
type benchTopology struct {
	b          benchDeliver
	rcvAddr    string // where the receiver listens
	closedAddr string // where nothing listens (--dead)
}

// endpoint returns the URL and timeout of endpoint i.
func (bt benchTopology) endpoint(i int) (string, time.Duration) {
	switch {
	case bt.b.dead && i == 0:
		return "http://" + bt.closedAddr + "/in", 10 * time.Second
	case bt.b.dead && i == 1:
		return "http://" + bt.rcvAddr + "/hole", 5 * time.Second
	}
	return fmt.Sprintf("http://%s/in/%02d", bt.rcvAddr, i), 10 * time.Second
}

func endpointName(i int) string     { return fmt.Sprintf("receiver-%02d", i) }
func routeName(i int) string        { return fmt.Sprintf("bench-%02d", i) }
func subscriptionName(i int) string { return fmt.Sprintf("sub-%02d", i) }

// file returns the topology as it is built in this process.
func (bt benchTopology) file() *courier.Topology {
	b := bt.b
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{}, Routes: map[string]*courier.Route{},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}, Subscriptions: map[string]*courier.Subscription{}}
	for i := 0; i < b.endpoints; i++ {
		ep := courier.NewEndpoint(endpointName(i), courier.TransportHTTP)
		url, timeout := bt.endpoint(i)
		ep.Timeout, ep.MaxConcurrency = timeout, b.concurrency
		ep.Settings = &httptransport.Settings{URL: url, Method: http.MethodPost}
		top.Endpoints[ep.Name] = ep
		route := routeName(i)
		top.Routes[route] = &courier.Route{Name: route, Endpoints: []string{ep.Name}, Strategy: courier.StrategySingle, OrderedOnFailure: courier.OrderedBlock}
	}
	for i := 0; i < b.subs; i++ {
		name := subscriptionName(i)
		top.Subscriptions[name] = &courier.Subscription{Name: name, Types: []string{"bench"}, Route: routeName(i % b.endpoints)}
	}
	top.Prepare() // as a configuration file's topology is
	return top
}

// benchObject is one object of the topology in the form the API takes:
// the fields it has in the configuration file, as JSON.
type benchObject struct {
	kind courier.TopologyKind
	name string
	spec json.RawMessage
}

// objects returns the same topology as file, as the objects to create:
// the endpoints, then the routes, then the subscriptions, so that each
// object comes after what it uses.
func (bt benchTopology) objects() []benchObject {
	b := bt.b
	var out []benchObject
	for i := 0; i < b.endpoints; i++ {
		url, timeout := bt.endpoint(i)
		out = append(out, benchObject{courier.KindEndpoint, endpointName(i), json.RawMessage(fmt.Sprintf(
			`{"transport":"http","url":%q,"method":"POST","timeout":%q,"max_concurrency":%d}`, url, timeout, b.concurrency))})
	}
	for i := 0; i < b.endpoints; i++ {
		out = append(out, benchObject{courier.KindRoute, routeName(i), json.RawMessage(fmt.Sprintf(`{"endpoints":[%q]}`, endpointName(i)))})
	}
	for i := 0; i < b.subs; i++ {
		out = append(out, benchObject{courier.KindSubscription, subscriptionName(i),
			json.RawMessage(fmt.Sprintf(`{"types":["bench"],"route":%q}`, routeName(i%b.endpoints)))})
	}
	return out
}

// topologyCreation is what creating the topology through the API took.
type topologyCreation struct {
	Objects int     `json:"objects"`
	Puts    int     `json:"requests"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"objects_per_sec"`
	How     string  `json:"how"`
}

// createTopology creates the objects through the API of the server at
// base: with oneByOne one PUT per object, in order; else PUT /v1/topology
// with batch objects at a time (all of them when batch is 0).
func createTopology(ctx context.Context, g *globals, client *http.Client, base string, objs []benchObject, batch int, oneByOne bool) (*topologyCreation, error) {
	res := &topologyCreation{Objects: len(objs)}
	start := time.Now()
	if oneByOne {
		res.How = "one PUT per object"
		lap := start
		for i, o := range objs {
			path := "/v1/" + o.kind.Section() + "/" + url.PathEscape(o.name)
			if err := benchPut(ctx, client, base+path, o.spec, http.StatusCreated); err != nil {
				return nil, fmt.Errorf("create %s %s: %w", o.kind, o.name, err)
			}
			res.Puts++
			if n := i + 1; n%1000 == 0 {
				fmt.Fprintf(g.stderr, "  %6d objects created, the last 1,000 at %.0f/s\n", n, 1000/time.Since(lap).Seconds())
				lap = time.Now()
			}
		}
	} else {
		if batch <= 0 {
			batch = len(objs)
		}
		res.How = fmt.Sprintf("PUT /v1/topology, %d objects a request", batch)
		for first := 0; first < len(objs); first += batch {
			var t api.Topology
			for _, o := range objs[first:min(first+batch, len(objs))] {
				sec := t.Section(o.kind)
				if *sec == nil {
					*sec = map[string]json.RawMessage{}
				}
				(*sec)[o.name] = o.spec
			}
			body, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			if err := benchPut(ctx, client, base+"/v1/topology", body, http.StatusOK); err != nil {
				return nil, fmt.Errorf("apply objects %d to %d: %w", first, min(first+batch, len(objs))-1, err)
			}
			res.Puts++
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.PerSec = float64(res.Objects) / res.Seconds
	}
	return res, nil
}

// benchPut sends a PUT with a JSON body and fails unless the answer has
// status want.
func benchPut(ctx context.Context, client *http.Client, url string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != want {
		return fmt.Errorf("HTTP %d, want %d: %s", resp.StatusCode, want, bytes.TrimSpace(answer))
	}
	return nil
}
