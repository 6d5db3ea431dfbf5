package sqlstore

import (
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	// Headers are decoded on every claim; this package is the faster one.
	json "github.com/goccy/go-json"
)

// EncodeHeaders is how stores keep a message's headers: a JSON object, ""
// (NULL) for none.
func EncodeHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}

// DecodeHeaders reads what EncodeHeaders wrote; none for an empty text.
func DecodeHeaders(b []byte) (map[string]string, error) {
	return decodeObject[string](b, "headers")
}

// EncodeStepResponses is how stores keep the responses of a workflow's
// steps: a JSON object keyed by step number, written without HTML escaping
// (responses are often HTML or XML); "" for none, so that a message without
// a workflow costs no JSON work.
func EncodeStepResponses(r map[int]string) (string, error) {
	if len(r) == 0 {
		return "", nil
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return "", fmt.Errorf("encode step responses: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// DecodeStepResponses reads what EncodeStepResponses wrote; nothing for an
// empty text.
func DecodeStepResponses(b []byte) (map[int]string, error) {
	return decodeObject[int](b, "step responses")
}

// decodeObject reads a map kept as a JSON object, what names it in the
// error; an empty text is none.
func decodeObject[K comparable](b []byte, what string) (map[K]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m map[K]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return m, nil
}

// Existing is the result of ingesting m when its id is taken by stored: a
// repeat of it, or a conflict when the content differs.
func Existing(stored, m *courier.Message) courier.IngestResult {
	if stored.Hash != m.Hash {
		return courier.IngestResult{Status: courier.IngestConflict, Message: stored}
	}
	return courier.IngestResult{Status: courier.IngestExists, Message: stored}
}

// SortClaimed puts claimed messages in the order to deliver them: highest
// priority first, then the longest due.
func SortClaimed(msgs []*courier.Message) {
	sort.SliceStable(msgs, func(i, j int) bool {
		if msgs[i].Priority != msgs[j].Priority {
			return msgs[i].Priority > msgs[j].Priority
		}
		return msgs[i].NextAttemptAt.Before(msgs[j].NextAttemptAt)
	})
}

// NonNil returns b, or an empty payload for nil: a payload column is not
// null.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// OrDefault returns t, or def when t is zero.
func OrDefault(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// Run returns what Store.Ingest stores as one from the head of msgs: the
// deliveries of one published message (one after another, the same id,
// each with its subscription, in name order: a name again begins the next
// publish), or else the one message at the head.
func Run(msgs []*courier.Message) []*courier.Message {
	n := 1
	if msgs[0].Subscription != "" {
		for n < len(msgs) && msgs[n].ID == msgs[0].ID && msgs[n].Subscription > msgs[n-1].Subscription {
			n++
		}
	}
	return msgs[:n]
}

// TypeCounts gathers the types of the messages one ingest creates, for the
// catalog of types: one row to write per type, not per message.
type TypeCounts []courier.TypeSeen

// Add counts message m (a published one once: add its first delivery).
func (c *TypeCounts) Add(m *courier.Message) {
	for i := range *c {
		if t := &(*c)[i]; t.Type == m.Type {
			t.Count++
			if m.CreatedAt.After(t.LastSeen) {
				t.LastSeen = m.CreatedAt
			}
			if m.CreatedAt.Before(t.FirstSeen) {
				t.FirstSeen = m.CreatedAt
			}
			return
		}
	}
	*c = append(*c, courier.TypeSeen{Type: m.Type, Count: 1, FirstSeen: m.CreatedAt, LastSeen: m.CreatedAt})
}

// AttemptColumns are the columns of table attempts that a store's scan of
// an attempt reads, in this order.
const AttemptColumns = `n, endpoint, route, started_at, duration_us, outcome, class, status, error, response`

// ScanAttempt reads a row of AttemptColumns into a.
func ScanAttempt(row Scanner, a *courier.Attempt) error {
	var started Time
	var durationUS int64
	var class, errText, response sql.NullString
	err := row.Scan(&a.N, &a.Endpoint, &a.Route, &started, &durationUS, &a.Outcome, &class, &a.Status, &errText, &response)
	a.StartedAt = started.Time
	a.Duration = time.Duration(durationUS) * time.Microsecond
	a.Class, a.Error, a.Response = courier.ErrorClass(class.String), errText.String, response.String
	return err
}

// Attempts reads the attempts of message or delivery key, oldest first,
// once found says it is stored (its error is the answer when it is not):
// w has the placeholders of the store's database, query runs the
// statement, and scan reads a row of AttemptColumns into an attempt whose
// message and subscription are set.
func Attempts(key string, w Where, found func() error, query QueryFunc, scan func(Scanner, *courier.Attempt) error) ([]courier.Attempt, error) {
	if err := found(); err != nil {
		return nil, err
	}
	id, sub := courier.ParseKey(key)
	w.Add("message_id = ?", key)
	rows, err := query(`SELECT `+AttemptColumns+` FROM attempts`+w.SQL()+` ORDER BY n`, w.Args...)
	return Collect([]courier.Attempt{}, rows, err, func(row Scanner) (courier.Attempt, error) {
		a := courier.Attempt{MessageID: id, Subscription: sub}
		err := scan(row, &a)
		return a, err
	})
}
