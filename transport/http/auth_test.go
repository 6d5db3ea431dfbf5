package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// tokenServer is an OAuth2 token endpoint on loopback: it hands out
// tokens "tok-1", "tok-2", ... to the client credentials it knows, each
// valid for lifetime, and can be told to fail.
type tokenServer struct {
	*httptest.Server
	mu       sync.Mutex
	issued   int
	down     bool
	lifetime time.Duration
	forms    []map[string]string
}

func newTokenServer(t *testing.T, lifetime time.Duration) *tokenServer {
	t.Helper()
	ts := &tokenServer{lifetime: lifetime}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.down {
			http.Error(w, "token service unavailable", http.StatusServiceUnavailable)
			return
		}
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != "courier" || secret != "client-s3cret" ||
			r.PostForm.Get("grant_type") != "client_credentials" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		ts.forms = append(ts.forms, form)
		ts.issued++
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", ts.issued),
			"token_type": "Bearer", "expires_in": int(ts.lifetime / time.Second)})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.issued
}

func (ts *tokenServer) setDown(down bool) {
	ts.mu.Lock()
	ts.down = down
	ts.mu.Unlock()
}

// authReceiver records the Authorization of every request, and answers
// 401 to the tokens in refuse.
type authReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []http.Header
	refuse map[string]bool
}

func newAuthReceiver(t *testing.T) *authReceiver {
	t.Helper()
	ar := &authReceiver{refuse: map[string]bool{}}
	ar.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar.mu.Lock()
		defer ar.mu.Unlock()
		ar.got = append(ar.got, r.Header.Clone())
		if ar.refuse[r.Header.Get("Authorization")] {
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(ar.Close)
	return ar
}

func (ar *authReceiver) authorizations() []string {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	var out []string
	for _, h := range ar.got {
		out = append(out, h.Get("Authorization"))
	}
	return out
}

func oauth2Endpoint(receiver, tokenURL string) *courier.Endpoint {
	e := endpoint("crm", receiver)
	httptransport.Of(e).Auth.OAuth2 = &httptransport.OAuth2{TokenURL: tokenURL, ClientID: "courier",
		ClientSecret: "client-s3cret", Scopes: []string{"orders.write", "orders.read"}, Audience: "https://crm.example"}
	return e
}

func TestOAuth2TokenIsReusedAndRenewedBeforeItExpires(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, time.Hour)
	ar := newAuthReceiver(t)
	clock := clocktest.New(now)
	tr := newTransport(t, httptransport.Options{Clock: clock})
	e := oauth2Endpoint(ar.URL, ts.URL)

	for range 3 {
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("not delivered: %+v", res)
		}
	}
	clock.Advance(time.Hour - 61*time.Second) // a minute and a second left: still good
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("not delivered: %+v", res)
	}
	if got := ts.count(); got != 1 {
		t.Fatalf("%d tokens obtained for 4 attempts within the token's lifetime, want 1", got)
	}
	if st := tr.AuthState(e); st.Kind != "oauth2" || !st.TokenExpiry.Equal(now.Add(time.Hour)) && st.TokenExpiry.Sub(now.Add(time.Hour)).Abs() > 5*time.Second {
		t.Fatalf("auth state %+v, want oauth2 expiring at about %v", st, now.Add(time.Hour))
	}
	clock.Advance(2 * time.Second) // less than a minute left: renewed ahead of the expiry
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("not delivered: %+v", res)
	}
	if got := ts.count(); got != 2 {
		t.Fatalf("%d tokens obtained, want 2: the token was not renewed before its expiry", got)
	}
	want := []string{"Bearer tok-1", "Bearer tok-1", "Bearer tok-1", "Bearer tok-1", "Bearer tok-2"}
	if got := ar.authorizations(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Authorization sent %q, want %q", got, want)
	}
	form := ts.forms[0]
	if form["scope"] != "orders.write orders.read" || form["audience"] != "https://crm.example" {
		t.Fatalf("token request %v, want the scopes and the audience", form)
	}
}

func TestOAuth2A401GetsOneNewTokenAndOneRetry(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, time.Hour)
	ar := newAuthReceiver(t)
	tr := newTransport(t, httptransport.Options{})
	e := oauth2Endpoint(ar.URL, ts.URL)
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("not delivered: %+v", res)
	}
	// The receiver stops taking the token it has (revoked, say).
	ar.mu.Lock()
	ar.refuse["Bearer tok-1"] = true
	ar.mu.Unlock()
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("not delivered after a 401 and a new token: %+v", res)
	}
	if got := ts.count(); got != 2 {
		t.Fatalf("%d tokens obtained, want 2: one refresh after the 401", got)
	}
	want := "Bearer tok-1,Bearer tok-1,Bearer tok-2"
	if got := strings.Join(ar.authorizations(), ","); got != want {
		t.Fatalf("requests %q, want %q: exactly one retry with the new token", got, want)
	}

	// A receiver that refuses every token: one refresh, one retry, and
	// the attempt fails with the 401.
	ar.mu.Lock()
	ar.refuse["Bearer tok-2"], ar.refuse["Bearer tok-3"], ar.refuse["Bearer tok-4"] = true, true, true
	ar.mu.Unlock()
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassHTTP4xx)
	if res.Status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", res.Status)
	}
	if got := ts.count(); got != 3 {
		t.Fatalf("%d tokens obtained, want 3: one more refresh, not a loop", got)
	}
	if got := len(ar.authorizations()); got != 5 {
		t.Fatalf("%d requests, want 5: the refused attempt sent twice, no more", got)
	}
}

func TestOAuth2TokenServerDownIsClassAuth(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, time.Hour)
	ts.setDown(true)
	ar := newAuthReceiver(t)
	clock := clocktest.New(now)
	tr := newTransport(t, httptransport.Options{Clock: clock})
	e := oauth2Endpoint(ar.URL, ts.URL)
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassAuth)
	wantError(t, res, "503")
	if len(ar.authorizations()) != 0 {
		t.Fatal("the receiver was sent a request without a token")
	}
	if strings.Contains(res.Error, "client-s3cret") {
		t.Fatalf("the error %q shows the client secret", res.Error)
	}
	st := tr.AuthState(e)
	if !st.LastFailure.Equal(now) || !strings.Contains(st.LastError, "503") || !st.TokenExpiry.IsZero() {
		t.Fatalf("auth state %+v, want the failure at %v and no token", st, now)
	}

	// Wrong credentials: the token endpoint's error code is shown.
	bad := oauth2Endpoint(ar.URL, ts.URL)
	httptransport.Of(bad).Auth.OAuth2.ClientSecret = "wrong"
	ts.setDown(false)
	res = send(t, tr, bad, message())
	wantClass(t, res, courier.ClassAuth)
	wantError(t, res, "invalid_client")

	// Closed for good: a refused connection to the token endpoint is auth
	// too, not the receiver's connect_refused.
	url := ts.URL
	ts.Close()
	clock.Advance(2 * time.Second) // past the hold of the last failure
	res = send(t, tr, oauth2Endpoint(ar.URL, url), message())
	wantClass(t, res, courier.ClassAuth)
	wantError(t, res, "refused")
}

func TestStaticCredentialsAndHeaders(t *testing.T) {
	t.Parallel()
	ar := newAuthReceiver(t)
	tr := newTransport(t, httptransport.Options{})
	m := message()
	m.Headers = map[string]string{"Authorization": "Bearer from-the-message", "X-Api-Key": "from-the-message", "X-Tenant": "acme"}

	basic := endpoint("basic", ar.URL)
	httptransport.Of(basic).Auth.Basic = &httptransport.BasicAuth{Username: "courier", Password: "pa:ss"}
	httptransport.Of(basic).Headers = []httptransport.Header{{Name: "X-Api-Key", Value: "k-123", Secret: true}, {Name: "X-Region", Value: "eu"}}
	bearer := endpoint("bearer", ar.URL)
	httptransport.Of(bearer).Auth.Bearer = "static-token"
	for _, e := range []*courier.Endpoint{basic, bearer} {
		if res := send(t, tr, e, m); !res.Delivered() {
			t.Fatalf("not delivered: %+v", res)
		}
	}
	ar.mu.Lock()
	got := ar.got
	ar.mu.Unlock()
	if u, p, ok := (&http.Request{Header: got[0]}).BasicAuth(); !ok || u != "courier" || p != "pa:ss" {
		t.Errorf("basic credentials %q %q, want courier pa:ss", u, p)
	}
	if v := got[0]["X-Api-Key"]; len(v) != 1 || v[0] != "k-123" {
		t.Errorf("X-Api-Key %q, want the endpoint's alone", v)
	}
	if got[0].Get("X-Region") != "eu" || got[0].Get("X-Tenant") != "acme" {
		t.Errorf("headers %v, want the endpoint's and the message's others", got[0])
	}
	if v := got[1]["Authorization"]; len(v) != 1 || v[0] != "Bearer static-token" {
		t.Errorf("Authorization %q, want the endpoint's token alone", v)
	}
	if st := tr.AuthState(basic); st.Kind != "basic" {
		t.Errorf("auth state %+v, want basic", st)
	}
}

func TestRedactedSettingsHoldNoSecret(t *testing.T) {
	t.Parallel()
	e := oauth2Endpoint("https://crm.example/hook", "https://auth.example/token")
	s := httptransport.Of(e)
	s.Headers = []httptransport.Header{{Name: "X-Api-Key", Value: "k-123", Secret: true}, {Name: "X-Region", Value: "eu"}}
	b := endpoint("b", "https://b.example")
	httptransport.Of(b).Auth.Basic = &httptransport.BasicAuth{Username: "u", Password: "basic-pw"}
	c := endpoint("c", "https://c.example")
	httptransport.Of(c).Auth.Bearer = "bearer-tok"
	for _, e := range []*courier.Endpoint{e, b, c} {
		w, err := json.Marshal(httptransport.Kind.Wire(e.Redacted().Settings))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"client-s3cret", "k-123", "basic-pw", "bearer-tok"} {
			if strings.Contains(string(w), secret) {
				t.Errorf("the API's settings %s show %q", w, secret)
			}
		}
		t.Logf("%s", w)
	}
	if s.Headers[0].Value != "k-123" || s.Auth.OAuth2.ClientSecret != "client-s3cret" {
		t.Fatal("Redacted changed the endpoint's own settings")
	}
}

// While the token endpoint is down, the attempts that need a token meanwhile
// fail with its one failure rather than each asking it again; once the
// hold is over, it is asked again.
func TestOAuth2OutageAsksTheTokenEndpointOnce(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	ar := newAuthReceiver(t)
	clock := clocktest.New(now)
	tr := newTransport(t, httptransport.Options{Clock: clock})
	e := oauth2Endpoint(ar.URL, down.URL)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if res := send(t, tr, e, message()); res.Class != courier.ClassAuth {
				t.Errorf("class %q, want auth", res.Class)
			}
		})
	}
	wg.Wait()
	first := asked.Load()
	if first == 0 || first > 2 { // one fetch: the client tries its credentials in the header, then in the form
		t.Fatalf("the token endpoint was asked %d times for 8 attempts, want one fetch", first)
	}
	clock.Advance(2 * time.Second)
	send(t, tr, e, message())
	if asked.Load() == first {
		t.Fatal("the token endpoint was not asked again after the hold")
	}
}
