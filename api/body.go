package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	courier "github.com/courier-gw/courier"
	json "github.com/goccy/go-json"
)

// readBody reads a request body of at most limit bytes.
func readBody(r *http.Request, w http.ResponseWriter, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, courier.Errorf(courier.CodePayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // one allocation for the usual case
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, courier.Errorf(courier.CodePayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	if err != nil {
		return nil, malformed("reading the request body: %v", err)
	}
	return body, nil
}

// decodeSmall reads a small JSON request body strictly; an empty body is
// the zero value.
func (s *Server) decodeSmall(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(r, w, 64<<10)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v, "valid")
}

// decodeBody reads a JSON request body of at most limit bytes strictly
// into v; what says what the body must be ("a valid batch request").
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, what string) error {
	body, err := readBody(r, w, limit)
	if err != nil {
		return err
	}
	return decodeStrict(body, v, what)
}

// decodeStrict decodes body into v, refusing a field v does not have;
// what says what the body must be, for the error.
func decodeStrict(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return malformed("the body is not %s: %v", what, jsonError(err))
	}
	return nil
}

// jsonError turns a decoding error into a message for the sender.
func jsonError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not a JSON %s", typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	default:
		return err.Error()
	}
}

// writeJSON answers with v as JSON. Every body of the API is written here,
// with <, > and & as they are: the answers are JSON, never HTML, and an
// error that quotes "<nil>" or a URL with "&" should read as it was written.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
