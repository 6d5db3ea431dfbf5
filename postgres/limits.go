package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

var _ courier.SharedLimits = (*Store)(nil)

// A node's share of an endpoint's max_concurrency is one row of
// endpoint_holds: how many slots it holds, until when. Nodes take slots of
// an endpoint one at a time, under the endpoint's transaction-scoped
// advisory lock (class slotLockClass, of the ordering keys' two-key space);
// the statement that counts and takes runs after the lock is held, so its
// snapshot sees every count written before.

// slotLockClass is the advisory lock class of endpoint slots.
const slotLockClass = "1668248442"

// holdGrace is how long before it lapses a hold can no longer be renewed:
// a node that counts other nodes' holds may read one as it was before a
// renewal committed, and this margin keeps such a read from taking a hold
// as lapsed while its renewal is under way.
const holdGrace = "interval '1 second'"

// acquireChunk bounds the endpoints of one transaction, so that the
// advisory locks it takes stay well within the server's lock table.
const acquireChunk = 256

// lockSlotsSQL takes the advisory locks of endpoints $1, in the order of
// their lock numbers so that two nodes never wait on each other in turn.
const lockSlotsSQL = `SELECT pg_advisory_xact_lock(` + slotLockClass + `, h)
	FROM (SELECT DISTINCT hashtext(e) AS h FROM unnest($1::text[]) AS e ORDER BY 1) k`

// takeSlotsSQL raises owner $4's hold of endpoint $1[i] by up to $3[i],
// within $2[i] slots less the live holds of other owners, held for $5
// microseconds; it returns the holds owner has of those endpoints now. A
// hold that would be none is deleted instead.
const takeSlotsSQL = `WITH want AS (
	SELECT w.endpoint,
		least(w.max - COALESCE((SELECT sum(o.n) FROM endpoint_holds o
				WHERE o.endpoint = w.endpoint AND o.owner <> $4 AND o.until >= clock_timestamp()), 0),
			COALESCE((SELECT m.n FROM endpoint_holds m
				WHERE m.endpoint = w.endpoint AND m.owner = $4 AND m.until >= clock_timestamp() + ` + holdGrace + `), 0) + w.n) AS n
	FROM unnest($1::text[], $2::int[], $3::int[]) AS w(endpoint, max, n)
), gone AS (
	DELETE FROM endpoint_holds h USING want
	WHERE h.endpoint = want.endpoint AND h.owner = $4 AND want.n <= 0
)
INSERT INTO endpoint_holds AS h (endpoint, owner, n, until)
SELECT endpoint, $4, n, clock_timestamp() + $5 * interval '1 microsecond' FROM want WHERE n > 0
ON CONFLICT (endpoint, owner) DO UPDATE SET n = EXCLUDED.n, until = EXCLUDED.until
RETURNING endpoint, n`

// AcquireSlots takes free slots of the endpoints for owner.
func (s *Store) AcquireSlots(ctx context.Context, owner string, want []courier.SlotRequest, ttl time.Duration) (map[string]int, error) {
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b courier.SlotRequest) int { return strings.Compare(a.Endpoint, b.Endpoint) })
	want = slices.CompactFunc(want, func(a, b courier.SlotRequest) bool { return a.Endpoint == b.Endpoint })
	out := make(map[string]int, len(want))
	for chunk := range slices.Chunk(want, acquireChunk) {
		endpoints := make([]string, len(chunk))
		maxes, ns := make([]int32, len(chunk)), make([]int32, len(chunk))
		for i, w := range chunk {
			endpoints[i], maxes[i], ns[i] = w.Endpoint, int32(max(w.Max, 1)), int32(max(w.N, 0))
		}
		// One batch is one transaction: the locks are held until the
		// counts are written.
		var b pgx.Batch
		b.Queue(lockSlotsSQL, endpoints)
		b.Queue(takeSlotsSQL, endpoints, maxes, ns, owner, ttl.Microseconds())
		results := s.pool.SendBatch(ctx, &b)
		if _, err := results.Exec(); err != nil {
			results.Close()
			return nil, classify("lock endpoint slots", err)
		}
		rows, err := results.Query()
		err = collectHolds(rows, err, out)
		if cerr := results.Close(); err == nil && cerr != nil {
			err = classify("acquire endpoint slots", cerr)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RenewSlots extends the holds owner still has, and deletes every hold
// that lapsed: its owner stopped renewing it, and no count includes it.
func (s *Store) RenewSlots(ctx context.Context, owner string, ttl time.Duration) (map[string]int, error) {
	var b pgx.Batch
	b.Queue(`DELETE FROM endpoint_holds WHERE until < clock_timestamp()`)
	b.Queue(`UPDATE endpoint_holds SET until = clock_timestamp() + $2 * interval '1 microsecond'
		WHERE owner = $1 AND until >= clock_timestamp() + `+holdGrace+` RETURNING endpoint, n`, owner, ttl.Microseconds())
	results := s.pool.SendBatch(ctx, &b)
	defer results.Close()
	if _, err := results.Exec(); err != nil {
		return nil, classify("forget lapsed endpoint slots", err)
	}
	out := map[string]int{}
	rows, err := results.Query()
	if err := collectHolds(rows, err, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseSlots gives back n slots of each endpoint owner holds; a hold that
// comes to none is deleted.
func (s *Store) ReleaseSlots(ctx context.Context, owner string, slots map[string]int) error {
	var endpoints []string
	var ns []int32
	for ep, n := range slots {
		if n > 0 {
			endpoints, ns = append(endpoints, ep), append(ns, int32(n))
		}
	}
	if len(endpoints) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `WITH r AS (
		SELECT * FROM unnest($2::text[], $3::int[]) AS r(endpoint, n)
	), fewer AS (
		UPDATE endpoint_holds h SET n = h.n - r.n FROM r
		WHERE h.endpoint = r.endpoint AND h.owner = $1 AND h.n > r.n
	)
	DELETE FROM endpoint_holds h USING r WHERE h.endpoint = r.endpoint AND h.owner = $1 AND h.n <= r.n`,
		owner, endpoints, ns); err != nil {
		return classify("release endpoint slots", err)
	}
	return nil
}

// collectHolds adds the (endpoint, n) rows to out.
func collectHolds(rows pgx.Rows, err error, out map[string]int) error {
	type hold struct {
		endpoint string
		n        int32
	}
	holds, err := collect(nil, rows, err, "endpoint slots", func(row scanner) (hold, error) {
		var h hold
		err := row.Scan(&h.endpoint, &h.n)
		return h, err
	})
	for _, h := range holds {
		out[h.endpoint] = int(h.n)
	}
	return err
}

// bookSQL books the next start of endpoint $1 ($2 the interval, $3 the
// lead, both in microseconds) on the database's clock and returns whether
// it did and the wait in microseconds: until the booked start, or, when the
// next free start is further than the lead, until a booking may be tried.
// The upsert holds the endpoint's row, so bookings from several nodes are
// spaced one after the other.
const bookSQL = `WITH booked AS (
	INSERT INTO endpoint_pace AS p (endpoint, next_at) VALUES ($1, clock_timestamp() + $2 * interval '1 microsecond')
	ON CONFLICT (endpoint) DO UPDATE
		SET next_at = greatest(p.next_at, clock_timestamp()) + $2 * interval '1 microsecond'
		WHERE p.next_at <= clock_timestamp() + $3 * interval '1 microsecond'
	RETURNING next_at - $2 * interval '1 microsecond' AS at
)
SELECT EXISTS (SELECT 1 FROM booked),
	(extract(epoch FROM COALESCE((SELECT at FROM booked),
		(SELECT next_at - $3 * interval '1 microsecond' FROM endpoint_pace WHERE endpoint = $1)) - clock_timestamp()) * 1e6)::bigint`

// BookStart books the next start of a paced endpoint for every node.
func (s *Store) BookStart(ctx context.Context, endpoint string, interval, lead time.Duration) (time.Duration, bool, error) {
	var ok bool
	var waitUS int64
	if err := s.pool.QueryRow(ctx, bookSQL, endpoint, interval.Microseconds(), lead.Microseconds()).Scan(&ok, &waitUS); err != nil {
		return 0, false, classify("book the next start of "+endpoint, err)
	}
	return max(time.Duration(waitUS)*time.Microsecond, 0), ok, nil
}
