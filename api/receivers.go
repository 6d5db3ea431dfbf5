package api

import (
	"context"
	"net/http"
	"net/url"

	courier "github.com/courier-gw/courier"
)

// ReceiverList is the body of GET /v1/receivers.
type ReceiverList struct {
	Receivers []courier.ReceiverStatus `json:"receivers"`
}

func (s *Server) handleReceivers(w http.ResponseWriter, r *http.Request) {
	list := ReceiverList{Receivers: []courier.ReceiverStatus{}}
	if s.opts.Receivers != nil {
		list.Receivers = append(list.Receivers, s.opts.Receivers.Statuses()...)
	}
	writeJSON(w, http.StatusOK, list)
}

// handleReceiverSwitch stops or starts a receive location on this node.
func (s *Server) handleReceiverSwitch(start bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if s.opts.Receivers == nil {
			s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "receiver %q is not configured", name))
			return
		}
		who := actor(r)
		var err error
		if start {
			err = s.opts.Receivers.StartReceiver(name, who)
		} else {
			err = s.opts.Receivers.StopReceiver(name, who)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		st, err := s.opts.Receivers.Status(name)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

// Receivers lists the receive locations of the server's node.
func (c *Client) Receivers(ctx context.Context) ([]courier.ReceiverStatus, error) {
	out, err := request[ReceiverList](ctx, c, http.MethodGet, "/v1/receivers", nil)
	if err != nil {
		return nil, err
	}
	return out.Receivers, nil
}

// SwitchReceiver stops a receive location (start false) or starts it again.
func (c *Client) SwitchReceiver(ctx context.Context, name string, start bool) (*courier.ReceiverStatus, error) {
	verb := "stop"
	if start {
		verb = "start"
	}
	return request[courier.ReceiverStatus](ctx, c, http.MethodPost, "/v1/receivers/"+url.PathEscape(name)+"/"+verb, nil)
}
