package courier

// Spreads reports whether the route spreads its messages over its
// endpoints (round robin, weighted) rather than giving them all to the
// first endpoint that can send (single, failover).
func (r *Route) Spreads() bool {
	return r.Strategy == StrategyRoundRobin || r.Strategy == StrategyWeighted
}

// ChooseOrder orders the endpoints of r that can send, the one to try first
// for m's attempt first (docs/design.md §4): single and failover keep the route's
// order, so the first that sends takes the message; round robin starts at
// the pos-th; weighted at the endpoint whose share of the weights the
// pos-th message falls into. After a failure of m (its LastClass is set),
// the endpoint it failed on goes last on a failover or spreading route, so
// that the retry prefers another that can send. canSend is in the route's
// order and is not changed; pos counts the route's messages.
func (r *Route) ChooseOrder(canSend []*Endpoint, pos uint64, m *Message) []*Endpoint {
	if len(canSend) == 0 {
		return nil
	}
	order := canSend
	if r.Spreads() {
		start := int(pos % uint64(len(canSend)))
		if r.Strategy == StrategyWeighted {
			total := 0
			for _, ep := range canSend {
				total += r.weight(ep.Name)
			}
			at := int(pos % uint64(total))
			for i, ep := range canSend {
				if at -= r.weight(ep.Name); at < 0 {
					start = i
					break
				}
			}
		}
		order = append(append(make([]*Endpoint, 0, len(canSend)), canSend[start:]...), canSend[:start]...)
	}
	if m != nil && m.LastClass != "" && len(order) > 1 && order[0].Name == m.Endpoint &&
		(r.Spreads() || r.Strategy == StrategyFailover) {
		order = append(append(make([]*Endpoint, 0, len(order)), order[1:]...), order[0])
	}
	return order
}

// weight is an endpoint's weight on a weighted route; missing or
// non-positive weights count 1.
func (r *Route) weight(endpoint string) int {
	if w, ok := r.Weights[endpoint]; ok && w > 0 {
		return w
	}
	return 1
}
