package config

import (
	"time"

	"github.com/courier-gw/courier"
)

// Every default of the configuration is here, so that the documentation, the
// no-file case and the parser cannot disagree.

// DefaultShutdownTimeout ends a stop inside the grace period that
// orchestrators give a process before they kill it (30 s in Kubernetes).
const DefaultShutdownTimeout = 20 * time.Second

// DefaultSenderShare lets one API key hold half of what a node admits of
// ingest in flight: a key that floods it leaves the other half to the
// others.
const DefaultSenderShare = 0.5

// Default returns the configuration of a courier started without a file: a
// loopback listener, an embedded SQLite store in ./courier-data, and the
// topology in the store (the file's Topology has only the built-in default
// policy).
func Default() *Config {
	return &Config{
		Listen:          "127.0.0.1:8425",
		Store:           Store{Driver: DriverSQLite, Path: "./courier-data/courier.db"},
		Retention:       7 * 24 * time.Hour,
		ShutdownTimeout: DefaultShutdownTimeout,
		MaxPayload:      courier.DefaultMaxPayload,
		MaxBatchBytes:   courier.DefaultMaxBatchBytes,
		IngestInFlight:  IngestInFlight{SenderShare: DefaultSenderShare},
		Log:             Log{Format: "text", Level: "info"},
		Tracing:         Tracing{Sample: 1},
		Keys:            map[string]Key{},
		Receivers:       map[string]*courier.Receiver{},
		Alerts:          defaultAlerts(),
		TopologyInStore: true,
		KeysInStore:     true,
		Specs:           Specs{},
		Topology: &courier.Topology{
			Endpoints:     map[string]*courier.Endpoint{},
			Routes:        map[string]*courier.Route{},
			Policies:      map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
			Subscriptions: map[string]*courier.Subscription{},
		},
		lines: map[string]int{},
	}
}

// defaultStrategy is single for one endpoint and failover for more: a list
// of endpoints written without a strategy reads as primary and backups.
func defaultStrategy(endpoints int) courier.Strategy {
	if endpoints > 1 {
		return courier.StrategyFailover
	}
	return courier.StrategySingle
}

// defaultOrderedOnFailure keeps an ordering key waiting behind a suspended
// head, because skipping it breaks the order the sender asked for.
const defaultOrderedOnFailure = courier.OrderedBlock
