package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

var _ courier.SharedLimits = (*Store)(nil)

// A node's share of an endpoint's max_concurrency is one row of
// endpoint_holds: how many slots it holds, until when. Nodes take slots of
// an endpoint one at a time, under the endpoint's transaction-scoped
// advisory lock (class slotLockClass, of the ordering keys' two-key space):
// a node reads the endpoint's holds after the lock is held, so that it sees
// every hold written before, courier.SlotShare decides its share, and it
// writes it before the lock is given back.

// slotLockClass is the advisory lock class of endpoint slots.
const slotLockClass = "1668248442"

// acquireChunk bounds the endpoints of one transaction, so that the
// advisory locks it takes stay well within the server's lock table.
const acquireChunk = 256

// lockSlotsSQL takes the advisory locks of endpoints $1, in the order of
// their lock numbers so that two nodes never wait on each other in turn.
const lockSlotsSQL = `SELECT pg_advisory_xact_lock(` + slotLockClass + `, h)
	FROM (SELECT DISTINCT hashtext(e) AS h FROM unnest($1::text[]) AS e ORDER BY 1) k`

// holdsSQL reads the holds of endpoints $1.
const holdsSQL = `SELECT endpoint, owner, n, until FROM endpoint_holds WHERE endpoint = ANY($1::text[])`

// setHoldsSQL writes owner $1's holds of endpoints $2 as decided, $3 slots
// each (none: the hold is deleted), held until $4.
const setHoldsSQL = `WITH w AS (
	SELECT * FROM unnest($2::text[], $3::int[]) AS w(endpoint, n)
), gone AS (
	DELETE FROM endpoint_holds h USING w WHERE h.endpoint = w.endpoint AND h.owner = $1 AND w.n <= 0
)
INSERT INTO endpoint_holds AS h (endpoint, owner, n, until)
SELECT endpoint, $1, n, $4 FROM w WHERE n > 0
ON CONFLICT (endpoint, owner) DO UPDATE SET n = EXCLUDED.n, until = EXCLUDED.until`

// AcquireSlots takes free slots of the endpoints for owner, in one
// transaction per chunk of endpoints that takes two round trips: its
// locks and the endpoints' holds, then the holds decided and the commit.
func (s *Store) AcquireSlots(ctx context.Context, owner string, want []courier.SlotRequest, ttl time.Duration, now time.Time) (map[string]int, error) {
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b courier.SlotRequest) int { return strings.Compare(a.Endpoint, b.Endpoint) })
	want = slices.CompactFunc(want, func(a, b courier.SlotRequest) bool { return a.Endpoint == b.Endpoint })
	out := make(map[string]int, len(want))
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, classify("acquire endpoint slots", err)
	}
	// A connection left in its transaction by an error is closed, not
	// reused, and the transaction ends with it.
	defer conn.Release()
	for chunk := range slices.Chunk(want, acquireChunk) {
		endpoints := make([]string, len(chunk))
		for i, w := range chunk {
			endpoints[i] = w.Endpoint
		}
		var b pgx.Batch
		b.Queue(`BEGIN`)
		b.Queue(lockSlotsSQL, endpoints)
		b.Queue(holdsSQL, endpoints)
		results := conn.SendBatch(ctx, &b)
		_, err := results.Exec()
		if err == nil {
			_, err = results.Exec()
		}
		holds := map[string][]courier.SlotHold{}
		if err == nil {
			var ep string
			var h courier.SlotHold
			var n int32
			var rows pgx.Rows
			rows, err = results.Query()
			if err == nil {
				_, err = pgx.ForEachRow(rows, []any{&ep, &h.Owner, &n, &h.Until}, func() error {
					h.N = int(n)
					holds[ep] = append(holds[ep], h)
					return nil
				})
			}
		}
		if cerr := results.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, classify("read endpoint slots", err)
		}
		ns := make([]int32, len(chunk))
		for i, w := range chunk {
			n := courier.SlotShare(holds[w.Endpoint], owner, w, now)
			ns[i] = int32(max(n, 0))
			if n > 0 {
				out[w.Endpoint] = n
			}
		}
		b = pgx.Batch{}
		b.Queue(setHoldsSQL, owner, endpoints, ns, now.Add(ttl))
		b.Queue(`COMMIT`)
		if err := conn.SendBatch(ctx, &b).Close(); err != nil {
			return nil, classify("take endpoint slots", err)
		}
	}
	return out, nil
}

// RenewSlots extends the holds owner still has, and deletes every hold
// that lapsed: its owner stopped renewing it, and no count includes it.
func (s *Store) RenewSlots(ctx context.Context, owner string, ttl time.Duration, now time.Time) (map[string]int, error) {
	var b pgx.Batch
	b.Queue(`DELETE FROM endpoint_holds WHERE until < $1`, now)
	b.Queue(`UPDATE endpoint_holds SET until = $2 WHERE owner = $1 AND until >= $3 RETURNING endpoint, n`,
		owner, now.Add(ttl), now.Add(courier.SlotGrace))
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

// bookSQL books a start of endpoint $1: it moves the endpoint's next free
// start from $2 (NULL: none booked yet) to $3, as courier.NextStart decided
// from $2, if it is still $2. It returns whether it did, and the next free
// start that it found.
const bookSQL = `WITH found AS (
	SELECT next_at FROM endpoint_pace WHERE endpoint = $1
), booked AS (
	INSERT INTO endpoint_pace AS p (endpoint, next_at) VALUES ($1, $3)
	ON CONFLICT (endpoint) DO UPDATE SET next_at = EXCLUDED.next_at WHERE p.next_at = $2
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM booked), (SELECT next_at FROM found)`

// paces is, per paced endpoint, the next free start that this store last
// booked or found. The next free start only moves on, so that one known
// here is the one in the database, or one before it: a booking decided
// from it is written in one round trip unless another node booked since.
type paces struct {
	mu   sync.Mutex
	next map[string]time.Time
}

func (p *paces) get(endpoint string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next[endpoint]
}

func (p *paces) set(endpoint string, next time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[string]time.Time{}
	}
	if next.After(p.next[endpoint]) {
		p.next[endpoint] = next
	}
}

// BookStart books the next start of a paced endpoint for every node, as
// courier.NextStart decides at now from the endpoint's next free start. A
// booking that another node's overtook is refused with the time to try
// again (at once, if the start it left is free), so that the caller books
// again at its own now rather than one a round trip old.
func (s *Store) BookStart(ctx context.Context, endpoint string, interval, lead time.Duration, now time.Time) (time.Duration, bool, error) {
	next := s.paces.get(endpoint)
	at, after, ok := courier.NextStart(next, now, interval, lead)
	if !ok {
		// The next free start is later still if another node booked.
		return at.Sub(now), false, nil
	}
	// The database keeps microseconds: rounded up, the interval stays whole.
	after = after.Add(time.Microsecond - 1).Truncate(time.Microsecond)
	var prev *time.Time
	if !next.IsZero() {
		prev = &next
	}
	var booked bool
	var found *time.Time
	if err := s.pool.QueryRow(ctx, bookSQL, endpoint, prev, after).Scan(&booked, &found); err != nil {
		return 0, false, classify("book the next start of "+endpoint, err)
	}
	if booked {
		s.paces.set(endpoint, after)
		return max(at.Sub(now), 0), true, nil
	}
	if found != nil {
		s.paces.set(endpoint, *found)
		if at, _, ok := courier.NextStart(*found, now, interval, lead); !ok {
			return at.Sub(now), false, nil
		}
	}
	return 0, false, nil
}

// lockBucketSQL reads tenant $1's ingest bucket and locks its row until
// the transaction ends, making the row (a full bucket: no time) if there
// is none, in one statement.
const lockBucketSQL = `INSERT INTO tenant_tokens AS t (tenant) VALUES ($1)
	ON CONFLICT (tenant) DO UPDATE SET tenant = t.tenant
	RETURNING tokens, at`

// buckets is, per tenant, its ingest bucket as this store last wrote or
// read it. Tokens are only taken away, and come back with time alone, so
// the stored bucket has no more tokens than one known here: a take that
// the one known here refuses is refused without asking the database. The
// takes of a tenant on this node go one at a time (its turn), so that the
// node's takers, waking together when a token comes back, send one take
// to the database and the others find the bucket known here empty again,
// rather than queueing on the row's lock behind the other nodes' takers.
type buckets struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	turn  sync.Mutex
	known courier.TokenBucket // zero: not known
}

// of returns tenant's bucket, made when first asked for.
func (b *buckets) of(tenant string) *bucket {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*bucket{}
	}
	k := b.m[tenant]
	if k == nil {
		k = &bucket{}
		b.m[tenant] = k
	}
	return k
}

// TakeTokens takes n tokens of tenant's bucket for every node, as
// courier.TakeTokens decides at now from the stored bucket, read under the
// lock of its row and written before the lock is given back: two round
// trips, like AcquireSlots. Takers of one tenant on every node take turns
// on its row, each for a round trip (some two thousand takes a second
// with the database a fraction of a millisecond away); a take that the
// bucket known here refuses costs none.
func (s *Store) TakeTokens(ctx context.Context, tenant string, rate courier.Rate, burst, n int, now time.Time) (time.Duration, bool, error) {
	if rate.Unlimited() {
		return 0, true, nil
	}
	k := s.buckets.of(tenant)
	k.turn.Lock()
	defer k.turn.Unlock()
	if !k.known.At.IsZero() {
		if _, wait, ok := courier.TakeTokens(k.known, rate, burst, n, now); !ok {
			return wait, false, nil
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, false, classify("take ingest tokens of "+tenant, err)
	}
	// A connection left in its transaction by an error is closed, not
	// reused, and the transaction ends with it.
	defer conn.Release()
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(lockBucketSQL, tenant)
	results := conn.SendBatch(ctx, &b)
	var tokens *float64
	var at *time.Time
	_, err = results.Exec()
	if err == nil {
		err = results.QueryRow().Scan(&tokens, &at)
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, false, classify("read the ingest tokens of "+tenant, err)
	}
	var stored courier.TokenBucket
	if tokens != nil && at != nil {
		stored = courier.TokenBucket{Tokens: *tokens, At: at.UTC()}
	}
	next, wait, ok := courier.TakeTokens(stored, rate, burst, n, now)
	b = pgx.Batch{}
	if ok {
		b.Queue(`UPDATE tenant_tokens SET tokens = $2, at = $3 WHERE tenant = $1`, tenant, next.Tokens, next.At)
	} else {
		next = stored
	}
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, &b).Close(); err != nil {
		return 0, false, classify("take ingest tokens of "+tenant, err)
	}
	k.known = next
	return wait, ok, nil
}
