package postgres

import (
	"context"
	"errors"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// Resend puts a finished message or delivery back in the queue, due at a.At.
func (s *Store) Resend(ctx context.Context, key string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Resend(key, a)
	m, err := s.transition(ctx, key, a, decide)
	if err == nil {
		s.dueNow(m.Route)
	}
	return m, err
}

// Types lists the types taken in, by name, summing the shards of each
// (migration 0010).
func (s *Store) Types(ctx context.Context) ([]courier.TypeSeen, error) {
	rows, err := s.pool.Query(ctx, `SELECT type, sum(count)::bigint, min(first_seen), max(last_seen) FROM types
		GROUP BY type ORDER BY type COLLATE "C"`)
	return collect([]courier.TypeSeen{}, rows, err, "list types", func(row scanner) (courier.TypeSeen, error) {
		var t courier.TypeSeen
		err := row.Scan(&t.Type, &t.Count, &t.FirstSeen, &t.LastSeen)
		t.FirstSeen, t.LastSeen = t.FirstSeen.UTC(), t.LastSeen.UTC()
		return t, err
	})
}

// replayedSQL stores a delivery that a replay gives: a shared row, whose
// payload is its lead's, counted in its tenant's use (countUsage).
const replayedSQL = `WITH usage_rows AS (INSERT INTO messages (id, subscription, shared, type, route, size, content_type, headers, ordering_key,
	priority, deliver_after, expires_at, hash, state, next_attempt_at, created_at, updated_at, round_started_at, timer_at,
	sender, recipient, blob, digest)
	VALUES ($1, $2, true, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, 'queued', $13, $14, $15, $15, $15, $16, $17, $18, $19)
	ON CONFLICT (id, ` + leadKey + `) DO NOTHING
	RETURNING id, size, 1 AS delta
), ` + countUsage + `
SELECT count(*) FROM usage_rows`

// ReplayBatch does its batch under the locks of the messages' ordering
// keys.
func (b bulkTx) ReplayBatch(r *courier.Replay, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	rows, err := b.tx.Query(b.ctx, `SELECT `+messageColumns+` FROM messages
		WHERE seq > $1 AND seq <= $2 AND NOT shared AND subscription <> '' AND created_at >= $3 AND created_at < $4
		ORDER BY seq LIMIT $5`, *cursor, maxSeq, r.Since, r.Until, limit)
	leads, seqs, err := sqlstore.CollectNumbered(rows, err, func(row scanner) (*courier.Message, int64, error) {
		return scanMessage(row, false)
	})
	if err != nil {
		return 0, false, classify("select for replay", err)
	}
	var keys []string
	for _, m := range leads {
		if m.OrderingKey != "" && r.Wants(m) {
			keys = append(keys, m.OrderingKey)
		}
	}
	if len(keys) > 0 {
		if _, err := b.tx.Exec(b.ctx, lockKeysSQL, keys); err != nil {
			return 0, false, classify("lock ordering keys", err)
		}
	}
	n, err = sqlstore.ReplayBatch(r, leads, now,
		func(id string) (bool, error) {
			var one int
			err := b.tx.QueryRow(b.ctx, `SELECT 1 FROM messages WHERE id = $1 AND subscription = $2`, id, r.Subscription.Name).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, nil
			}
			return err == nil, classify("read a delivery for replay", err)
		},
		func(key string, decide sqlstore.Decide) error { _, err := act(b.ctx, b.tx, key, decide); return err },
		func(_ int, d *courier.Message) error {
			if err := courier.AdmitKeyed(keyTx{b.ctx, b.tx}, []*courier.Message{d}); err != nil {
				return err
			}
			headers, err := encodeHeaders(d.Headers)
			if err != nil {
				return err
			}
			_, err = b.tx.Exec(b.ctx, replayedSQL, d.ID, d.Subscription, d.Type, d.Route, int32(d.Size), d.ContentType, headers,
				nullString(d.OrderingKey), int16(d.Priority), ts(d.DeliverAfter), ts(d.ExpiresAt), d.Hash, ts(d.NextAttemptAt),
				d.CreatedAt, now, nullString(d.Sender), nullString(d.Recipient), nullString(d.Blob), nullString(d.Digest))
			return classify("store a replayed delivery of "+d.ID, err)
		})
	if len(seqs) > 0 {
		*cursor = seqs[len(seqs)-1]
	}
	return n, len(leads) < limit, err
}
