package smtp

import (
	"errors"
	"fmt"
	netsmtp "net/smtp"
	"slices"
	"strings"
)

// authFor picks the AUTH mechanism for the server's list: PLAIN, else
// LOGIN (which some servers, Microsoft's among them, offer instead). Both
// send the password only over TLS or to localhost: never across a network
// in the clear.
func authFor(offered, username, password, host string) (netsmtp.Auth, error) {
	mechs := strings.Fields(strings.ToUpper(offered))
	switch {
	case slices.Contains(mechs, "PLAIN"):
		return netsmtp.PlainAuth("", username, password, host), nil
	case slices.Contains(mechs, "LOGIN"):
		return &loginAuth{username: username, password: password, host: host}, nil
	}
	return nil, fmt.Errorf("the server offers AUTH %s; courier speaks PLAIN and LOGIN", offered)
}

// loginAuth is the LOGIN mechanism: the server asks for the user name and
// then the password, each base64 encoded on the wire (net/smtp does that).
type loginAuth struct {
	username, password, host string
	step                     int
}

func (a *loginAuth) Start(server *netsmtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !isLocalhost(server.Name) {
		return "", nil, errors.New("unencrypted connection")
	}
	if server.Name != a.host {
		return "", nil, errors.New("wrong host name")
	}
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	switch a.step {
	case 1:
		return []byte(a.username), nil
	case 2:
		return []byte(a.password), nil
	}
	return nil, fmt.Errorf("unexpected LOGIN challenge %q", fromServer)
}

func isLocalhost(name string) bool {
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
}
