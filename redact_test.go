package courier_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
)

func TestEndpointRedacted(t *testing.T) {
	e := courier.NewEndpoint("acme", courier.TransportHTTP)
	e.HTTP.URL = "https://erp:s3cret@erp.acme.example/in?token=t0ken&tenant=acme"
	e.HTTP.Secrets = []string{"whsec_b2xk", "whsec_bmV3"}
	e.SMTP.Password = "mail-pass"
	e.AMQP.URL = "amqp://guest:rabbit@127.0.0.1:5672/"
	r := e.Redacted()
	got := fmt.Sprintf("%+v", *r)
	for _, secret := range []string{"s3cret", "t0ken", "whsec_", "mail-pass", "rabbit"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted endpoint shows %q: %s", secret, got)
		}
	}
	if e.HTTP.Secrets[0] != "whsec_b2xk" || !strings.Contains(e.HTTP.URL, "s3cret") {
		t.Error("Redacted changed the endpoint itself")
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "endpoint", e)
	if strings.Contains(buf.String(), "s3cret") || strings.Contains(buf.String(), "t0ken") || !strings.Contains(buf.String(), "erp.acme.example") {
		t.Errorf("logged endpoint: %s", buf.String())
	}
}

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"https://a.example/x", "https://a.example/x"},
		{"https://u:p@a.example/x?k=v", "https://u:xxxxx@a.example/x?k=REDACTED"},
		{"::not a url", courier.Redacted},
		// A user part alone is a token: NATS takes one so, and so do
		// webhook hosts that read the user name as a key.
		{"nats://s3cr3t-t0ken@127.0.0.1:4222", "nats://REDACTED@127.0.0.1:4222"},
		{"amqp://s3cr3t-t0ken@mq.example/", "amqp://REDACTED@mq.example/"},
		{"https://ghp_s3cr3t@hooks.example/in", "https://REDACTED@hooks.example/in"},
		{"nats://user:s3cr3t@n.example:4222", "nats://user:xxxxx@n.example:4222"},
		// A NATS server list, each with its token.
		{"nats://t0ken-a@n1.example:4222, nats://t0ken-b@n2.example:4222", "nats://REDACTED@n1.example:4222,nats://REDACTED@n2.example:4222"},
		// A comma within one URL is not a list.
		{"https://a.example/x,y?k=v", "https://a.example/x,y?k=REDACTED"},
		// Without an authority there is no telling what the user info is.
		{"nats:s3cr3t@n.example", courier.Redacted},
		{"s3cr3t@n.example", courier.Redacted},
	} {
		got := courier.RedactURL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for _, secret := range []string{"s3cr3t", "t0ken"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q shows the secret", tt.in, got)
			}
		}
	}
}
