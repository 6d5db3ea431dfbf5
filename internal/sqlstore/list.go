package sqlstore

import (
	"encoding/base64"
	"strconv"

	courier "github.com/courier-gw/courier"
)

// ListQuery returns the statement that reads a page of the messages that
// match f, newest first (columns of table messages), with its arguments in
// w, and the size of the page. It reads one row more than the page holds,
// which tells Page whether another page follows.
func ListQuery(w *Where, columns string, f courier.MessageFilter) (query string, limit int, err error) {
	w.Filter(f)
	return pageQuery(w, columns, "messages", f.Cursor, f.Limit)
}

// pageQuery completes the statement that reads a page of rows (columns
// of table) newest first, by their sequence numbers, with its arguments
// in w, and returns it with the size of the page asked for with limit
// (pageSize): the rows before that of cursor, when there is one, and one
// row more than the page holds, which tells whether another page follows.
func pageQuery(w *Where, columns, table, cursor string, limit int) (query string, size int, err error) {
	size = pageSize(limit)
	if cursor != "" {
		seq, err := DecodeCursor(cursor)
		if err != nil {
			return "", 0, err
		}
		w.Add("seq < ?", seq)
	}
	return `SELECT ` + columns + ` FROM ` + table + w.SQL() + ` ORDER BY seq DESC LIMIT ` + w.Arg(size+1), size, nil
}

// readPage runs q, a pageQuery of a page of limit rows, with its args
// through query, and returns the rows scan reads, up to limit (none: an
// empty slice), with the cursor of the next page when there were more
// (seq gives a row's sequence number).
func readPage[T any](q string, args []any, limit int, query QueryFunc,
	scan func(Scanner) (T, error), seq func(T) int64) ([]T, string, error) {
	rows, err := query(q, args...)
	out, err := Collect([]T{}, rows, err, scan)
	if err != nil {
		return nil, "", err
	}
	if len(out) <= limit {
		return out, "", nil
	}
	return out[:limit], EncodeCursor(seq(out[limit-1])), nil
}

// ListMessages reads the page of the messages that match f, newest first,
// as ListQuery and Page make it: w has the placeholders of the store's
// database, query runs the statement with its arguments, and scan reads a
// row of the columns into a message and its ingest sequence number.
func ListMessages(w Where, columns string, f courier.MessageFilter, query QueryFunc,
	scan func(Scanner) (*courier.Message, int64, error)) (courier.MessagePage, error) {
	q, limit, err := ListQuery(&w, columns, f)
	if err != nil {
		return courier.MessagePage{}, err
	}
	rows, err := query(q, w.Args...)
	msgs, seqs, err := CollectNumbered(rows, err, scan)
	if err != nil {
		return courier.MessagePage{}, err
	}
	return Page(msgs, seqs, limit), nil
}

// CollectNumbered reads every row of a query of messages through scan, as
// Collect does, and returns the messages with their ingest sequence
// numbers, in the same order.
func CollectNumbered(rows Rows, err error, scan func(Scanner) (*courier.Message, int64, error)) ([]*courier.Message, []int64, error) {
	var seqs []int64
	msgs, err := Collect(nil, rows, err, func(row Scanner) (*courier.Message, error) {
		m, seq, err := scan(row)
		seqs = append(seqs, seq)
		return m, err
	})
	return msgs, seqs, err
}

// Page makes the page of a list read with ListQuery from the messages it
// read and their ingest sequence numbers: up to limit messages, and, when
// there were more, the cursor of the next page.
func Page(msgs []*courier.Message, seqs []int64, limit int) courier.MessagePage {
	if len(msgs) <= limit {
		return courier.MessagePage{Messages: msgs}
	}
	return courier.MessagePage{Messages: msgs[:limit], Next: EncodeCursor(seqs[limit-1])}
}

// pageSize is the size of a page asked for with limit: DefaultListLimit
// for none, at most MaxListLimit.
func pageSize(limit int) int {
	if limit <= 0 {
		return courier.DefaultListLimit
	}
	return min(limit, courier.MaxListLimit)
}

// EncodeCursor returns the cursor of the page after the row (a message by
// its ingest sequence number, an action by its own) with sequence number
// seq.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

// DecodeCursor returns the sequence number of an EncodeCursor cursor; any
// other text is an invalid argument.
func DecodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var seq int64
		if seq, err = strconv.ParseInt(string(b), 10, 64); err == nil && seq > 0 {
			return seq, nil
		}
	}
	return 0, courier.Errorf(courier.CodeInvalidArgument, "cursor %q is not valid", c)
}
