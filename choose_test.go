package courier_test

import (
	"fmt"
	"testing"

	courier "github.com/courier-gw/courier"
)

func TestChooseOrder(t *testing.T) {
	eps := func(names ...string) []*courier.Endpoint {
		var out []*courier.Endpoint
		for _, n := range names {
			out = append(out, &courier.Endpoint{Name: n})
		}
		return out
	}
	names := func(eps []*courier.Endpoint) string {
		var out []string
		for _, e := range eps {
			out = append(out, e.Name)
		}
		return fmt.Sprint(out)
	}
	failedOn := func(ep string) *courier.Message {
		return &courier.Message{Endpoint: ep, LastClass: courier.ClassHTTP5xx}
	}
	weighted := &courier.Route{Strategy: courier.StrategyWeighted, Weights: map[string]int{"a": 3, "b": 1}}
	for _, tt := range []struct {
		name  string
		route *courier.Route
		can   []*courier.Endpoint
		pos   uint64
		m     *courier.Message
		want  string
	}{
		{"single keeps its order", &courier.Route{Strategy: courier.StrategySingle}, eps("a"), 7, nil, "[a]"},
		{"failover: the first that sends", &courier.Route{Strategy: courier.StrategyFailover}, eps("a", "b", "c"), 5, &courier.Message{}, "[a b c]"},
		{"failover after a failure on the first", &courier.Route{Strategy: courier.StrategyFailover}, eps("a", "b"), 0, failedOn("a"), "[b a]"},
		{"failover after a failure elsewhere", &courier.Route{Strategy: courier.StrategyFailover}, eps("a", "b"), 0, failedOn("b"), "[a b]"},
		{"single retries its only endpoint", &courier.Route{Strategy: courier.StrategySingle}, eps("a"), 0, failedOn("a"), "[a]"},
		{"round robin starts at pos", &courier.Route{Strategy: courier.StrategyRoundRobin}, eps("a", "b", "c"), 4, nil, "[b c a]"},
		{"round robin after a failure", &courier.Route{Strategy: courier.StrategyRoundRobin}, eps("a", "b", "c"), 3, failedOn("a"), "[b c a]"},
		{"weighted, pos in a's share", weighted, eps("a", "b"), 2, nil, "[a b]"},
		{"weighted, pos in b's share", weighted, eps("a", "b"), 3, nil, "[b a]"},
		{"weighted, next turn", weighted, eps("a", "b"), 4, nil, "[a b]"},
		{"weighted, only b can send", weighted, eps("b"), 1, nil, "[b]"},
		{"nothing can send", &courier.Route{Strategy: courier.StrategyFailover}, nil, 0, nil, "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(tt.route.ChooseOrder(tt.can, tt.pos, tt.m)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	// Over many messages the weights hold exactly.
	counts := map[string]int{}
	for pos := uint64(0); pos < 400; pos++ {
		counts[weighted.ChooseOrder(eps("a", "b"), pos, nil)[0].Name]++
	}
	if counts["a"] != 300 || counts["b"] != 100 {
		t.Errorf("weighted 3:1 over 400 messages: %v", counts)
	}
}
