package postgres

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

var _ courier.SharedLimits = (*Store)(nil)

// makeSlotsSQL makes the slot rows of endpoints $1[i] with $2[i] slots.
const makeSlotsSQL = `INSERT INTO endpoint_slots (endpoint, slot)
	SELECT w.endpoint, g.slot FROM unnest($1::text[], $2::int[]) AS w(endpoint, max)
	CROSS JOIN LATERAL generate_series(0, w.max - 1) AS g(slot)
	ON CONFLICT DO NOTHING`

// acquireSQL takes up to $3[i] more free slots below $2[i] of endpoint
// $1[i] for owner $4, held for $5 microseconds, and returns every slot the
// owner holds on those endpoints. Free slots are taken with SKIP LOCKED, so
// that nodes never wait for each other. Each endpoint's slots are read
// through the primary key, a range each: with ten thousand endpoints a
// join would read every slot of every endpoint.
const acquireSQL = `WITH want AS (
	SELECT * FROM unnest($1::text[], $2::int[], $3::int[]) AS w(endpoint, max, n)
), free AS (
	SELECT f.endpoint, f.slot FROM want CROSS JOIN LATERAL (
		SELECT endpoint, slot FROM endpoint_slots
		WHERE endpoint = want.endpoint AND slot < want.max
			AND (owner IS NULL OR until < clock_timestamp())
		ORDER BY slot LIMIT want.n
		FOR UPDATE SKIP LOCKED
	) f
), taken AS (
	UPDATE endpoint_slots s SET owner = $4, until = clock_timestamp() + $5 * interval '1 microsecond'
	FROM free WHERE s.endpoint = free.endpoint AND s.slot = free.slot
	RETURNING s.endpoint, s.slot
)
SELECT endpoint, slot FROM taken
UNION
SELECT h.endpoint, h.slot FROM want CROSS JOIN LATERAL (
	SELECT endpoint, slot FROM endpoint_slots
	WHERE endpoint = want.endpoint AND owner = $4 AND until >= clock_timestamp()
) h`

// AcquireSlots takes free slots of the endpoints for owner.
func (s *Store) AcquireSlots(ctx context.Context, owner string, want []courier.SlotRequest, ttl time.Duration) (map[string][]int, error) {
	endpoints := make([]string, len(want))
	maxes, ns := make([]int32, len(want)), make([]int32, len(want))
	for i, w := range want {
		endpoints[i], maxes[i], ns[i] = w.Endpoint, int32(max(w.Max, 1)), int32(max(w.N, 0))
	}
	// Slot rows are made on first use, in a statement of their own: the
	// acquiring statement would not see rows made by itself. Rows made
	// once stay, so each endpoint's are made once per store.
	var fresh []string
	var makeMax []int32
	for i, ep := range endpoints {
		if made, ok := s.slotsMade.Load(ep); !ok || made.(int32) < maxes[i] {
			fresh, makeMax = append(fresh, ep), append(makeMax, maxes[i])
		}
	}
	var b pgx.Batch
	if len(fresh) > 0 {
		b.Queue(makeSlotsSQL, fresh, makeMax)
	}
	b.Queue(acquireSQL, endpoints, maxes, ns, owner, ttl.Microseconds())
	results := s.pool.SendBatch(ctx, &b)
	defer results.Close()
	if len(fresh) > 0 {
		if _, err := results.Exec(); err != nil {
			return nil, unavailable("make endpoint slots", err)
		}
		for i, ep := range fresh {
			s.slotsMade.Store(ep, makeMax[i])
		}
	}
	rows, err := results.Query()
	return collectSlots(rows, err, "acquire endpoint slots")
}

// RenewSlots extends the slots owner still holds.
func (s *Store) RenewSlots(ctx context.Context, owner string, ttl time.Duration) (map[string][]int, error) {
	rows, err := s.pool.Query(ctx, `UPDATE endpoint_slots SET until = clock_timestamp() + $2 * interval '1 microsecond'
		WHERE owner = $1 AND until >= clock_timestamp() RETURNING endpoint, slot`, owner, ttl.Microseconds())
	return collectSlots(rows, err, "renew endpoint slots")
}

// ReleaseSlots frees slots owner holds.
func (s *Store) ReleaseSlots(ctx context.Context, owner string, slots map[string][]int) error {
	var endpoints []string
	var nums []int32
	for ep, list := range slots {
		for _, n := range list {
			endpoints, nums = append(endpoints, ep), append(nums, int32(n))
		}
	}
	if len(endpoints) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE endpoint_slots s SET owner = NULL, until = NULL
		FROM unnest($2::text[], $3::int[]) AS r(endpoint, slot)
		WHERE s.endpoint = r.endpoint AND s.slot = r.slot AND s.owner = $1`, owner, endpoints, nums); err != nil {
		return unavailable("release endpoint slots", err)
	}
	return nil
}

func collectSlots(rows pgx.Rows, err error, what string) (map[string][]int, error) {
	if err != nil {
		return nil, unavailable(what, err)
	}
	defer rows.Close()
	out := map[string][]int{}
	for rows.Next() {
		var ep string
		var slot int
		if err := rows.Scan(&ep, &slot); err != nil {
			return nil, unavailable(what, err)
		}
		out[ep] = append(out[ep], slot)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(what, err)
	}
	return out, nil
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
		return 0, false, unavailable("book the next start of "+endpoint, err)
	}
	return max(time.Duration(waitUS)*time.Microsecond, 0), ok, nil
}
