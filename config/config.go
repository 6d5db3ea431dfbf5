// Package config reads courier's YAML configuration (docs/design.md §9) into the
// server settings and the courier.Topology of endpoints, routes, policies
// and subscriptions. When the file leaves the topology to the store (docs/design.md
// §15), the same rules read the store's objects one at a time
// (DecodeObject) and put them together (Assemble).
//
// Everything is checked at load: unknown keys, types, ranges and references
// between sections. All problems are reported at once, each naming the file,
// the line and the field, because a gateway that refuses to start should say
// everything that is wrong in one go.
package config

import (
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net/netip"
	"os"
	"time"

	"github.com/courier-gw/courier"
)

// Config is a loaded configuration: how the server runs, who may call it, and
// the delivery topology.
type Config struct {
	// File is the file the configuration came from, for reloads and messages;
	// empty when there is none.
	File string

	// Listen is the host:port of the HTTP API and dashboard.
	Listen string
	// TLS makes the API serve HTTPS when both files are set.
	TLS TLS
	// Store selects and locates the database.
	Store Store
	// Retention is how long terminal messages are kept before the purge.
	Retention time.Duration
	// ShutdownTimeout bounds a stop: requests, receive locations, bulk
	// operations and attempts under way get this long to finish; what is
	// still under way then is cut off, as at a crash (leases lapse and
	// the messages are taken up again), and gets half a second more to
	// wind down before the store closes. The engine stops last and keeps
	// the second half for itself, with whatever the other parts leave of
	// the first, so that a part that overruns cannot leave it no time to
	// record the outcomes of the attempts under way.
	ShutdownTimeout time.Duration
	// MaxPayload is the largest payload one message may carry, in bytes.
	MaxPayload int64
	// MaxBatchBytes is the largest body of a batch ingest request, in bytes.
	MaxBatchBytes int64
	// IngestInFlight bounds the ingest requests a node works on at once.
	IngestInFlight IngestInFlight
	// Log chooses the log handler.
	Log Log
	// Tracing turns on OpenTelemetry tracing; the standard
	// OTEL_EXPORTER_OTLP_* variables turn it on too.
	Tracing Tracing
	// PublicURL is where people reach courier, for links in notices; empty
	// when unknown.
	PublicURL string
	// Keys are the API keys by name; with none, the API is for loopback only.
	Keys map[string]Key
	// Outbound is the SSRF guard of http endpoints.
	Outbound Outbound
	// SecretsKey encrypts the secrets of the topology held in the store;
	// SecretsOldKey, during a change of key, decrypts what the old key
	// encrypted. Each is SecretsKeySize bytes, or nil when not set.
	SecretsKey    []byte
	SecretsOldKey []byte
	// SigningKeys are the ed25519 keys that sign the requests of http
	// endpoints whose signature is v1a, oldest first, when the topology is
	// in the file; with the topology in the store, the store holds them.
	SigningKeys []httptransport.SigningKey

	// TopologyInStore says that the file has none of the sections
	// endpoints, routes, policies and subscriptions (or that there is no
	// file): the topology lives in the store and is changed through the
	// API (docs/design.md §15), and Topology holds only the default policy.
	TopologyInStore bool
	// KeysInStore says that the API keys live in the store too, changed
	// through the API: the topology does, and the file has no keys
	// section.
	KeysInStore bool
	// Topology holds the endpoints, routes, policies and subscriptions; its
	// Policies always has courier.DefaultPolicyName.
	Topology *courier.Topology
	// Specs are the file's topology objects and tenants in the store's
	// form, for courier apply; empty when the file has neither.
	Specs Specs
	// Receivers are the receive locations by name.
	Receivers map[string]*courier.Receiver
	// Alerts are who hears of operational events, when a route lags and
	// how many notices a subject may send in an hour; PublicURL is not
	// set here (the server's public_url is).
	Alerts courier.Alerts

	// lines maps a top-level field path (store.dsn) to its line in the file,
	// and envs to the COURIER_* variable that set it, so that checks made
	// after an override still point at the right place.
	lines map[string]int
	envs  map[string]string
}

// IngestInFlight bounds the ingest requests in flight on a node
// (ingest_in_flight): past a bound a request is refused 503 before its
// body is read, and a key past its share of one 429.
type IngestInFlight struct {
	// MaxBytes bounds the bytes of the request bodies in flight; 0 derives
	// it from the soft memory limit when the server starts.
	MaxBytes int64
	// MaxMessages bounds the messages in flight; 0 derives it from
	// MaxBytes.
	MaxMessages int
	// SenderShare is the part of each bound one API key may hold.
	SenderShare float64
}

// TLS names the certificate and key files of the HTTPS listener.
type TLS struct {
	Cert string
	Key  string
}

// Store selects the database: "sqlite" with a Path, or "postgres" with a DSN.
type Store struct {
	Driver string
	Path   string
	DSN    string
	// BlobDir is where payloads larger than courier.InlineMax are kept as
	// files: by default, for sqlite, beside the database (its path with
	// "-blobs"); for postgres, a directory every node shares. Empty on
	// postgres keeps them as large objects in the database.
	BlobDir string
	// BlobS3, when set (its zero value is not), keeps them in a bucket of
	// an S3-compatible service instead, on either driver.
	BlobS3 BlobS3
}

// BlobS3 locates the bucket of an S3-compatible service (AWS S3, MinIO,
// Ceph, Versity) where the blobs are kept, under a key prefix.
type BlobS3 struct {
	// Endpoint is the service's http:// or https:// URL, without a path.
	Endpoint string
	Bucket   string
	Prefix   string
	// Region is the bucket's; empty asks the service.
	Region    string
	AccessKey string
	SecretKey string
	// UploadGrace spares an object or an upload younger than this from
	// the sweep, as it may be another node's upload whose message is not
	// stored yet; 0 spares nothing (a bucket one node uses).
	UploadGrace time.Duration
}

// DefaultUploadGrace is the upload_grace of a blob_s3 that gives none.
const DefaultUploadGrace = time.Hour

// The store drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Tracing sends spans over OTLP/HTTP to Endpoint (e.g.
// http://collector:4318) when it is set, recording Sample (0 to 1) of the
// traces courier starts; a caller's trace is recorded as the caller
// decided.
type Tracing struct {
	Endpoint string
	Sample   float64
}

// Log chooses the log handler: Format "text" or "json", Level "debug",
// "info", "warn" or "error".
type Log struct {
	Format string
	Level  string
}

// Role says what an API key may do; the API decides what each allows.
type Role = courier.Role

// The roles of API keys.
const (
	RoleSender   = courier.RoleSender   // an application that hands in messages
	RoleOperator = courier.RoleOperator // a person who resubmits, discards and switches endpoints
	RoleAdmin    = courier.RoleAdmin    // may do everything
)

// DefaultMaxSuspended is the cap on suspended messages of a key that sets
// none: enough for any honest backlog, small enough that a misbehaving
// sender cannot fill the store with messages nobody will look at.
const DefaultMaxSuspended = 10000

// Key is one API key. Only the hash of its secret is configured, so that the
// file can be shared without giving access.
type Key struct {
	// Name is qualified: a tenant's key is tenant/name.
	Name string
	// Tenant is the tenant the key acts in; empty is the default tenant.
	// A key of courier.SystemTenant administers every tenant.
	Tenant string
	Role   Role
	// Hash is "sha256:" followed by the lowercase hex SHA-256 of the secret.
	Hash string
	// Routes limits a sender to these routes, by qualified name; empty
	// means every route of its tenant.
	Routes []string
	// Rate limits the messages the key may ingest; the zero Rate is unlimited.
	Rate courier.Rate
	// MaxSuspended refuses the key's ingest while it has this many suspended
	// messages; 0 means no cap.
	MaxSuspended int
}

// Outbound is the SSRF guard: http endpoints may not reach private, loopback
// or link-local addresses unless a network here (or on the endpoint) allows it.
type Outbound struct {
	AllowNetworks []netip.Prefix
	// Proxy is the http:// URL of the forward proxy of the http endpoints
	// that name none of their own (egress.proxy); empty: none.
	Proxy string
}

// Load reads and checks the configuration file at path, expanding ${NAME}
// and applying the COURIER_* overrides from the process environment.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// LoadTopology reads and checks the file at path as Load does, for the
// topology it holds to be applied to a server (courier apply): what depends
// on the settings of the server it goes to, a claim check's need of
// public_url and its ttl against retention, is left to that server, which
// checks it against its own settings when the topology is applied.
func LoadTopology(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return parse(path, data, os.LookupEnv, false)
}

// Parse reads and checks a configuration held in memory; filename is used in
// error messages only. lookupEnv answers both ${NAME} references and the
// COURIER_* overrides (nil: no environment). Any error is an Errors.
func Parse(filename string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(filename, data, lookupEnv, true)
}

// parse is Parse; serverChecks says whether what depends on the server's
// settings is checked too, as it is for the server's own file.
func parse(filename string, data []byte, lookupEnv func(string) (string, bool), serverChecks bool) (*Config, error) {
	c := Default()
	c.File = filename
	d := &decoder{file: filename, lookupEnv: lookupEnv, lines: c.lines}
	if root := d.parseYAML(data); root != nil {
		d.config(c, root)
	}
	d.errs = append(d.errs, c.applyEnv(lookupEnv)...)
	d.errs = append(d.errs, c.checkServer()...)
	if serverChecks {
		d.errs = append(d.errs, c.checkClaimChecks()...)
	}
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	return c, nil
}
