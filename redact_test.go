package courier_test

import (
	"bytes"
	"fmt"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	httptransport "github.com/courier-gw/courier/transport/http"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"log/slog"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
)

func TestEndpointRedacted(t *testing.T) {
	hook := courier.NewEndpoint("acme", courier.TransportHTTP)
	hook.Settings = &httptransport.Settings{URL: "https://erp:s3cret@erp.acme.example/in?token=t0ken&tenant=acme",
		Secrets: []string{"whsec_b2xk", "whsec_bmV3"}}
	mail := courier.NewEndpoint("mail", courier.TransportSMTP)
	mail.Settings = &smtptransport.Settings{Addr: "mail.example:587", Username: "u", Password: "mail-pass"}
	mq := courier.NewEndpoint("mq", courier.TransportAMQP)
	mq.Settings = &amqptransport.Settings{URL: "amqp://guest:rabbit@127.0.0.1:5672/"}
	for _, e := range []*courier.Endpoint{hook, mail, mq} {
		got := fmt.Sprintf("%+v %+v", *e.Redacted(), e.Redacted().Settings)
		for _, secret := range []string{"s3cret", "t0ken", "whsec_", "mail-pass", "rabbit"} {
			if strings.Contains(got, secret) {
				t.Errorf("redacted endpoint shows %q: %s", secret, got)
			}
		}
	}
	if httptransport.Of(hook).Secrets[0] != "whsec_b2xk" || !strings.Contains(httptransport.Of(hook).URL, "s3cret") ||
		smtptransport.Of(mail).Password != "mail-pass" {
		t.Error("Redacted changed the endpoint itself")
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "endpoint", hook)
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
