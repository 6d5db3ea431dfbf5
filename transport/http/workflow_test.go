package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

func sendStep(t *testing.T, tr *httptransport.Transport, e *courier.Endpoint, m *courier.Message, step *courier.StepContext) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Step: step})
}

// onlyArrival returns the one request that reached path.
func onlyArrival(t *testing.T, s *sink.Sink, path string) sink.Arrival {
	t.Helper()
	arr := s.Arrivals(path)
	if len(arr) != 1 {
		t.Fatalf("%d arrivals at %s, want 1", len(arr), path)
	}
	return arr[0]
}

func TestStepHeadersAndDeliveryID(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	const secret = "a plain shared secret"
	for _, tc := range []struct {
		name       string
		step       courier.StepContext
		id         string
		courStep   string
		compensate string // "" for none
	}{
		{"first step", courier.StepContext{Step: 1, Steps: 3}, "msg-1.1", "1/3", ""},
		{"middle step", courier.StepContext{Step: 2, Steps: 3}, "msg-1.2", "2/3", ""},
		{"compensation", courier.StepContext{Step: 2, Steps: 3, Compensate: true}, "msg-1.2.compensate", "2/3", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/" + strings.ReplaceAll(tc.name, " ", "-")
			e := endpoint("step", s.URL()+path)
			httptransport.Of(e).Secrets = []string{secret}
			m := message()
			m.Headers = map[string]string{
				"X-Tenant":                "acme",
				"Courier-Step":            "9/9", // the transport's own: left out
				"Courier-Compensate":      "false",
				"Courier-Step-1-Response": "forged",
			}
			step := tc.step
			if res := sendStep(t, tr, e, m, &step); !res.Delivered() {
				t.Fatalf("result = %+v", res)
			}
			a := onlyArrival(t, s, path)
			want := map[string][]string{
				"Webhook-Id":              {tc.id},
				"Courier-Step":            {tc.courStep},
				"Courier-Compensate":      nil,
				"Courier-Step-1-Response": nil,
				"Courier-Attempt":         {"1"},
				"Content-Type":            {"application/json"},
				"X-Tenant":                {"acme"},
			}
			if tc.compensate != "" {
				want["Courier-Compensate"] = []string{tc.compensate}
			}
			for k, v := range want {
				if got := a.Header.Values(k); !slices.Equal(got, v) {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if string(a.Body) != string(m.Payload) {
				t.Errorf("body = %q, want the payload %q", a.Body, m.Payload)
			}
			if err := verifyStandardWebhook(secret, a.Header, a.Body, now, 5*time.Minute); err != nil {
				t.Errorf("the signature does not verify with the step's id: %v", err)
			}
			// Signed over the step's id, not the message's: a signature
			// cannot be carried over to another step.
			h := a.Header.Clone()
			h.Set("webhook-id", m.ID)
			if err := verifyStandardWebhook(secret, h, a.Body, now, 5*time.Minute); err == nil {
				t.Error("the signature verifies with the message's id")
			}
		})
	}
}

func TestStepResponsesAsHeaders(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	limit := strings.Repeat("a", 4<<10-2) // quoted: exactly 4 KiB
	step := &courier.StepContext{Step: 12, Steps: 12, Compensate: true, Responses: map[int]string{
		1:  "{ \"id\" : 7,\n  \"ok\": true }",
		2:  `queued <now> & "later"`,
		3:  "",
		4:  limit,
		5:  limit + "a",                                   // quoted: one byte over
		6:  `{"big":"` + strings.Repeat("x", 5000) + `"}`, // JSON over 4 KiB
		7:  "\"del\x7f\"",                                 // a JSON string no header can carry
		8:  "line one\nline two",
		10: "[1, 2]",
	}}
	if res := sendStep(t, tr, endpoint("responses", s.URL()+"/responses"), message(), step); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	a := onlyArrival(t, s, "/responses")
	for _, tc := range []struct {
		j    string
		want []string // nil: left out
	}{
		{"1", []string{`{"id":7,"ok":true}`}},
		{"2", []string{`"queued \u003cnow\u003e \u0026 \"later\""`}},
		{"3", []string{`""`}},
		{"4", []string{`"` + limit + `"`}},
		{"5", nil},
		{"6", nil},
		{"7", nil},
		{"8", []string{`"line one\nline two"`}},
		{"9", nil},
		{"10", []string{`[1,2]`}},
		{"11", nil},
	} {
		k := "Courier-Step-" + tc.j + "-Response"
		if got := a.Header.Values(k); !slices.Equal(got, tc.want) {
			t.Errorf("%s = %.80q, want %.80q", k, got, tc.want)
		}
	}
	// Whatever a header carries decodes to the response it stands for.
	var got string
	if err := json.Unmarshal([]byte(a.Header.Get("Courier-Step-2-Response")), &got); err != nil || got != step.Responses[2] {
		t.Errorf("Courier-Step-2-Response decodes to %q (%v), want %q", got, err, step.Responses[2])
	}
}

func TestStepEnvelope(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	big := `{"big":"` + strings.Repeat("x", 5000) + `"}`
	responses := map[int]string{1: `{ "order": 7 }`, 2: "accepted", 10: big, 11: "\"del\x7f\""}
	// In step order, and with what the headers leave out.
	wantResponses := `{"1":{"order":7},"2":"accepted","10":` + big + `,"11":"del` + "\x7f" + `"}`
	for _, tc := range []struct {
		name        string
		payload     string
		contentType string
		compensate  bool
		want        map[string]string // the envelope's members as raw JSON
	}{
		{"JSON payload", "{\n  \"total\": 42, \"note\": \"<b>&</b>\"\n}", "application/json", false, map[string]string{
			"payload": `{"total":42,"note":"<b>&</b>"}`,
		}},
		{"JSON type with parameters", `[1, 2]`, "Application/CloudEvents+JSON; charset=utf-8", false, map[string]string{
			"payload": `[1,2]`,
		}},
		{"binary payload", "\x00\x01\xff\xfe", "application/octet-stream", false, map[string]string{
			"payload_base64": `"AAH//g=="`,
			"content_type":   `"application/octet-stream"`,
		}},
		{"JSON type that does not parse", `{"total":`, "application/json", false, map[string]string{
			"payload_base64": `"eyJ0b3RhbCI6"`,
			"content_type":   `"application/json"`,
		}},
		{"text without a content type", "hello", "", false, map[string]string{
			"payload_base64": `"aGVsbG8="`,
			"content_type":   `"application/octet-stream"`,
		}},
		{"compensation", `{"total":42}`, "application/json", true, map[string]string{
			"payload":    `{"total":42}`,
			"compensate": `true`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/" + strings.ReplaceAll(tc.name, " ", "-")
			e := endpoint("envelope", s.URL()+path)
			httptransport.Of(e).Secrets = []string{secret}
			m := message()
			m.Payload, m.ContentType = []byte(tc.payload), tc.contentType
			step := &courier.StepContext{Step: 11, Steps: 12, Compensate: tc.compensate, Responses: responses, Envelope: true}
			if res := sendStep(t, tr, e, m, step); !res.Delivered() {
				t.Fatalf("result = %+v", res)
			}
			a := onlyArrival(t, s, path)
			if got := a.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if got := a.Header.Get("Courier-Step"); got != "11/12" {
				t.Errorf("Courier-Step = %q, want 11/12", got)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(a.Body, &got); err != nil {
				t.Fatalf("the body is no JSON object: %v\n%s", err, a.Body)
			}
			want := maps.Clone(tc.want)
			want["step"], want["steps"], want["responses"] = "11", "12", wantResponses
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
				t.Errorf("members = %q, want %q", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for k, v := range want {
				if string(got[k]) != v {
					t.Errorf("%s = %.100s, want %.100s", k, got[k], v)
				}
			}
			if err := verifyStandardWebhook(secret, a.Header, a.Body, now, 5*time.Minute); err != nil {
				t.Errorf("the signature does not verify over the envelope: %v", err)
			}
		})
	}
}

func TestStepResultBody(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	// Text that shows where it was cut: "0000000 0000001 ...".
	var b strings.Builder
	for i := 0; b.Len() < courier.MaxStepResponse+4096; i++ {
		fmt.Fprintf(&b, "%07d ", i)
	}
	long := b.String()
	step := &courier.StepContext{Step: 1, Steps: 2}
	for _, tc := range []struct {
		name     string
		step     *courier.StepContext
		status   int
		body     string
		wantBody string
	}{
		{"small JSON", step, 200, `{"order":7}`, `{"order":7}`},
		{"no body", step, 204, "", ""},
		{"exactly the limit", step, 201, long[:courier.MaxStepResponse], long[:courier.MaxStepResponse]},
		{"over the limit", step, 200, long, long[:courier.MaxStepResponse]},
		{"failed step", step, 500, `{"error":"down"}`, ""},
		{"ordinary delivery", nil, 200, long, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/" + strings.ReplaceAll(tc.name, " ", "-")
			s.Script(path, sink.Respond(tc.status).WithBody(tc.body))
			res := sendStep(t, tr, endpoint("body", s.URL()+path), message(), tc.step)
			if got := res.Delivered(); got != (tc.status < 300) {
				t.Fatalf("delivered = %v, result %+v", got, res)
			}
			if res.Body != tc.wantBody {
				t.Errorf("Body has %d bytes (%.40q...), want %d (%.40q...)", len(res.Body), res.Body, len(tc.wantBody), tc.wantBody)
			}
			// The excerpt stays what it always was.
			wantExcerpt := tc.body[:min(len(tc.body), courier.MaxResponseExcerpt)]
			if res.Response != wantExcerpt {
				t.Errorf("Response = %.40q... (%d bytes), want the first %d bytes", res.Response, len(res.Response), len(wantExcerpt))
			}
		})
	}
}
