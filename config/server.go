package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"go.yaml.in/yaml/v3"
)

var topFields = []string{"listen", "tls", "store", "retention", "shutdown_timeout", "max_payload", "max_batch_bytes",
	"ingest_in_flight", "log", "tracing", "public_url", "secrets_key", "secrets_old_key", "signing_keys", "keys", "outbound", "endpoints", "routes", "policies",
	"subscriptions", "receivers", "alerts", "tenants"}

// config reads the top-level mapping into c. The server fields are only
// parsed here; checkServer judges them after the environment overrides.
func (d *decoder) config(c *Config, root *yaml.Node) {
	if root.Kind != yaml.MappingNode {
		d.errorf(max(root.Line, 1), "", "the configuration must be a mapping of settings (listen: ..., endpoints: ...), not a %s", kindName(root))
		return
	}
	o := d.object(root, "", root.Line, topFields)
	o.str("listen", &c.Listen)
	if t := o.sub("tls", []string{"cert", "key"}); t != nil {
		t.str("cert", &c.TLS.Cert)
		t.str("key", &c.TLS.Key)
	}
	if s := o.sub("store", []string{"driver", "path", "dsn", "blob_dir", "blob_s3"}); s != nil {
		s.str("driver", &c.Store.Driver)
		s.str("path", &c.Store.Path)
		s.str("dsn", &c.Store.DSN)
		s.str("blob_dir", &c.Store.BlobDir)
		if b := s.sub("blob_s3", []string{"endpoint", "bucket", "prefix", "region", "access_key", "secret_key", "upload_grace"}); b != nil {
			c.Store.BlobS3.UploadGrace = DefaultUploadGrace
			b.str("endpoint", &c.Store.BlobS3.Endpoint)
			b.str("bucket", &c.Store.BlobS3.Bucket)
			b.str("prefix", &c.Store.BlobS3.Prefix)
			b.str("region", &c.Store.BlobS3.Region)
			b.str("access_key", &c.Store.BlobS3.AccessKey)
			b.str("secret_key", &c.Store.BlobS3.SecretKey)
			b.duration("upload_grace", &c.Store.BlobS3.UploadGrace)
		}
	}
	o.duration("retention", &c.Retention)
	o.duration("shutdown_timeout", &c.ShutdownTimeout)
	o.size("max_payload", &c.MaxPayload)
	o.size("max_batch_bytes", &c.MaxBatchBytes)
	if f := o.sub("ingest_in_flight", []string{"max_bytes", "max_messages", "sender_share"}); f != nil {
		f.size("max_bytes", &c.IngestInFlight.MaxBytes)
		f.integer("max_messages", &c.IngestInFlight.MaxMessages)
		f.number("sender_share", &c.IngestInFlight.SenderShare)
	}
	if l := o.sub("log", []string{"format", "level"}); l != nil {
		l.str("format", &c.Log.Format)
		l.str("level", &c.Log.Level)
	}
	if t := o.sub("tracing", []string{"endpoint", "sample"}); t != nil {
		t.str("endpoint", &c.Tracing.Endpoint)
		t.number("sample", &c.Tracing.Sample)
	}
	o.str("public_url", &c.PublicURL)
	o.parsed("secrets_key", func(s string) (err error) {
		c.SecretsKey, err = parseSecretsKey(s)
		return err
	})
	o.parsed("secrets_old_key", func(s string) (err error) {
		c.SecretsOldKey, err = parseSecretsKey(s)
		return err
	})

	o.parsed("signing_keys", func(s string) (err error) {
		c.SigningKeys, err = parseSigningKeys(s)
		return err
	})

	c.TopologyInStore = !slices.ContainsFunc(courier.TopologyKinds, func(k courier.TopologyKind) bool { return o.has(k.Section()) })
	c.KeysInStore = c.TopologyInStore && !o.has("keys")
	var refs, routeRefs []ref
	d.tenants(o.value("tenants"), c.Topology, &routeRefs)
	d.known = c.Topology.Tenants
	if d.known == nil {
		d.known = map[string]*courier.Tenant{}
	}
	d.endpoints(o.value("endpoints"), c.Topology)
	d.routes(o.value("routes"), c.Topology, &refs)
	d.policies(o.value("policies"), c.Topology, &refs)
	d.subscriptions(o.value("subscriptions"), c.Topology, &refs)
	d.keys(o.value("keys"), c, &routeRefs)
	d.receivers(o.value("receivers"), c, &routeRefs)
	d.alerts(o, c, &routeRefs)
	if out := o.sub("outbound", []string{"allow_networks", "proxy"}); out != nil {
		c.Outbound.AllowNetworks = d.networks(out, "allow_networks")
		out.parsed("proxy", func(s string) error {
			c.Outbound.Proxy = s
			return httptransport.CheckProxy(s)
		})
	}
	if !c.TopologyInStore {
		// With the topology in the store, the routes that keys and receive
		// locations name, and the endpoints of the tenants' alerts, are the
		// store's, which may change at run time.
		refs = append(refs, routeRefs...)
	}
	d.checkRefs(c.Topology, refs)
	d.checkEndpointCaps(c.Topology)
	c.Topology.Prepare()
	if (!c.TopologyInStore || c.Topology.Tenants != nil) && len(d.errs) == 0 {
		c.Specs = d.specs(o)
	}
}

// networks parses a list of CIDRs, as the SSRF guard compares addresses
// with prefixes. Host bits are cleared: 10.1.2.3/8 means 10.0.0.0/8.
func (d *decoder) networks(o *object, name string) []netip.Prefix {
	items, _ := o.list(name)
	var out []netip.Prefix
	for _, it := range items {
		p, err := netip.ParsePrefix(strings.TrimSpace(it.value))
		if err != nil {
			d.errorf(it.line, it.field, "%q is not a network in CIDR notation (10.0.0.0/8, fd00::/8)", check.Clip(it.value))
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

var keyFields = []string{"tenant", "role", "hash", "routes", "rate", "max_suspended"}

// keys reads the API keys. Only a hash of each secret is configured; two
// keys with one hash would make the caller's identity ambiguous.
func (d *decoder) keys(n *yaml.Node, c *Config, refs *[]ref) {
	hashes := map[string]string{}
	for _, p := range d.entries(n, "keys") {
		k, hashLine := d.key(p, refs)
		if hashLine > 0 && validHash(k.Hash) {
			d.uniqueHash(hashes, k, hashLine, "keys."+k.Name+".hash")
		}
		if _, dup := c.Keys[k.Name]; dup {
			d.errorf(p.line, "keys."+p.key, "is key %q again: given twice", k.Name)
			continue
		}
		c.Keys[k.Name] = k
	}
}

// uniqueHash refuses a key whose hash another key has.
func (d *decoder) uniqueHash(hashes map[string]string, k Key, line int, field string) {
	if other, dup := hashes[k.Hash]; dup {
		d.errorf(line, field, "is the same as the hash of key %q: each key needs its own secret", other)
		return
	}
	hashes[k.Hash] = k.Name
}

// key reads one API key, and returns it with the line of its hash (0 when
// it has none).
func (d *decoder) key(p pair, refs *[]ref) (Key, int) {
	name, path := d.enter(p, "keys")
	defer d.leave()
	d.checkName(ownName(p), path, courier.ValidName)
	o := d.object(p.value, path, p.line, keyFields)
	d.tenantField(o, p)
	k := Key{Name: name, MaxSuspended: DefaultMaxSuspended}
	if d.tenant != courier.DefaultTenant {
		k.Tenant = d.tenant
	}
	var role string
	if o.required("role", ": one of sender, operator, admin") {
		if l := o.str("role", &role); l > 0 && !slices.Contains([]Role{RoleSender, RoleOperator, RoleAdmin}, Role(role)) {
			d.errorf(l, o.field("role"), "must be sender, operator or admin, not %q", check.Clip(role))
		}
	}
	k.Role = Role(role)
	hashLine := 0
	if o.required("hash", `: "sha256:" and the lowercase hex SHA-256 of the secret`) {
		if hashLine = o.str("hash", &k.Hash); hashLine > 0 && !validHash(k.Hash) {
			d.errorf(hashLine, o.field("hash"), `must be "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the secret`)
		}
	}
	if items, ok := o.list("routes"); ok {
		if k.Role == RoleOperator || k.Role == RoleAdmin {
			o.errorf("routes", "only sender keys are limited to routes; %s keys reach every route", role)
		}
		seen := map[string]bool{}
		for _, it := range items {
			if seen[it.value] {
				d.errorf(it.line, it.field, "route %q is listed twice", check.Clip(it.value))
				continue
			}
			seen[it.value] = true
			k.Routes = append(k.Routes, d.use(refs, ref{line: it.line, field: it.field, kind: "route", name: it.value}))
		}
	}
	o.parsed("rate", func(s string) (err error) {
		k.Rate, err = parseRate(s)
		return err
	})
	o.parsed("max_suspended", func(s string) error {
		s = strings.TrimSpace(s)
		if s == "unlimited" {
			k.MaxSuspended = 0
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("%q must be a whole number of at least 1, or unlimited", check.Clip(s))
		}
		k.MaxSuspended = n
		return nil
	})
	return k, hashLine
}

// parseRate reads a rate, or "unlimited": how a zero Rate prints, so that
// it reads back the same.
func parseRate(s string) (courier.Rate, error) {
	if strings.TrimSpace(s) == "unlimited" {
		return courier.Rate{}, nil
	}
	return courier.ParseRate(s)
}

func validHash(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// checkName reports an entry whose key is not a valid name.
func (d *decoder) checkName(p pair, path string, valid func(string) bool) {
	if !valid(p.key) {
		d.errorf(p.line, path, "%q is not a valid name: use 1 to %d letters, digits, '.', '_' or '-'", check.Clip(p.key), courier.MaxNameLen)
	}
}

// checkServer judges the top-level fields once the file and the environment
// have both had their say; each problem points at whichever of them set the
// value.
func (c *Config) checkServer() Errors {
	var errs Errors
	bad := func(fields []string, format string, args ...any) {
		errs = append(errs, c.problem(fields, fmt.Sprintf(format, args...)))
	}
	if err := check.HostPort(c.Listen, true); err != nil {
		bad([]string{"listen"}, "%v", err)
	}
	if len(c.SigningKeys) > 0 && c.TopologyInStore {
		bad([]string{"signing_keys"}, "the topology is in the store, which holds the signing keys too: make and rotate them with `courier signing-keys rotate`")
	}
	switch {
	case c.TLS.Cert != "" && c.TLS.Key == "":
		bad([]string{"tls.key", "tls.cert", "tls"}, "required when tls.cert is set")
	case c.TLS.Key != "" && c.TLS.Cert == "":
		bad([]string{"tls.cert", "tls.key", "tls"}, "required when tls.key is set")
	}
	switch c.Store.Driver {
	case DriverSQLite:
		if c.Store.Path == "" {
			bad([]string{"store.path", "store.driver", "store"}, "required with driver sqlite: the database file")
		}
	case DriverPostgres:
		switch {
		case c.Store.DSN == "":
			bad([]string{"store.dsn", "store.driver", "store"}, "required with driver postgres: postgres://user:password@host/db")
		case !strings.HasPrefix(c.Store.DSN, "postgres://") && !strings.HasPrefix(c.Store.DSN, "postgresql://"):
			bad([]string{"store.dsn", "store"}, "must be a URL starting with postgres:// or postgresql://")
		}
	default:
		bad([]string{"store.driver", "store"}, "must be sqlite or postgres, not %q", check.Clip(c.Store.Driver))
	}
	if c.setBy("store.blob_s3") || c.Store.BlobS3 != (BlobS3{}) {
		c.checkBlobS3(bad)
	}
	if c.Retention <= 0 {
		bad([]string{"retention"}, "must be greater than 0")
	}
	if c.ShutdownTimeout <= 0 {
		bad([]string{"shutdown_timeout"}, "must be greater than 0")
	}
	if c.MaxPayload <= 0 {
		bad([]string{"max_payload"}, "must be greater than 0")
	}
	if c.MaxBatchBytes <= 0 {
		bad([]string{"max_batch_bytes"}, "must be greater than 0")
	}
	if c.IngestInFlight.MaxBytes <= 0 && c.setBy("ingest_in_flight.max_bytes") {
		bad([]string{"ingest_in_flight.max_bytes", "ingest_in_flight"}, "must be greater than 0 (or left out: derived from the memory limit)")
	}
	if c.IngestInFlight.MaxMessages < 0 || c.IngestInFlight.MaxMessages == 0 && c.setBy("ingest_in_flight.max_messages") {
		bad([]string{"ingest_in_flight.max_messages", "ingest_in_flight"}, "must be greater than 0 (or left out: derived from max_bytes)")
	}
	if sh := c.IngestInFlight.SenderShare; sh <= 0 || sh > 1 {
		bad([]string{"ingest_in_flight.sender_share", "ingest_in_flight"}, "must be greater than 0 and at most 1, not %g", sh)
	}
	// max_payload may exceed max_batch_bytes: a batch carries small
	// messages, and a large one comes alone, streamed (PUT with a raw body).
	if c.MaxPayload > courier.MaxPayloadCeiling {
		bad([]string{"max_payload"}, "must be at most %s", formatSize(courier.MaxPayloadCeiling))
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		bad([]string{"log.format", "log"}, "must be text or json, not %q", check.Clip(c.Log.Format))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad([]string{"log.level", "log"}, "must be debug, info, warn or error, not %q", check.Clip(c.Log.Level))
	}
	if c.Tracing.Endpoint != "" {
		if err := check.URL(c.Tracing.Endpoint, "http", "https"); err != nil {
			bad([]string{"tracing.endpoint", "tracing"}, "must be an absolute http or https URL (the OTLP/HTTP collector, e.g. http://collector:4318)")
		}
	}
	if c.Tracing.Sample < 0 || c.Tracing.Sample > 1 {
		bad([]string{"tracing.sample", "tracing"}, "must be between 0 and 1, not %g", c.Tracing.Sample)
	}
	if c.PublicURL != "" {
		if err := check.URL(c.PublicURL, "http", "https"); err != nil {
			bad([]string{"public_url"}, "must be an absolute http or https URL")
		}
	}
	if c.SecretsOldKey != nil && c.SecretsKey == nil {
		bad([]string{"secrets_old_key"}, "requires secrets_key: the old key only reads what was stored before secrets_key replaced it")
	}
	return errs
}

// checkBlobS3 judges the store's bucket. The errors never quote the keys.
func (c *Config) checkBlobS3(bad func(fields []string, format string, args ...any)) {
	b := c.Store.BlobS3
	if c.Store.BlobDir != "" {
		bad([]string{"store.blob_s3", "store.blob_dir", "store"}, "cannot be given with store.blob_dir: the blobs are kept in one place")
	}
	if b.Endpoint == "" {
		bad([]string{"store.blob_s3.endpoint", "store.blob_s3", "store"}, "required: the S3 service's URL, such as https://s3.eu-west-1.amazonaws.com")
	} else if u, err := url.Parse(b.Endpoint); check.URL(b.Endpoint, "http", "https") != nil || err != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		bad([]string{"store.blob_s3.endpoint", "store.blob_s3", "store"}, "must be an http or https URL of the S3 service without a path or keys (the bucket goes in bucket, the keys in access_key and secret_key)")
	}
	if b.Bucket == "" {
		bad([]string{"store.blob_s3.bucket", "store.blob_s3", "store"}, "required: the bucket that keeps the blobs")
	} else if !validBucket(b.Bucket) {
		bad([]string{"store.blob_s3.bucket", "store.blob_s3", "store"}, "%q is not a bucket name: use 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit", check.Clip(b.Bucket))
	}
	switch {
	case b.AccessKey == "" && b.SecretKey != "":
		bad([]string{"store.blob_s3.access_key", "store.blob_s3", "store"}, "required with secret_key")
	case b.SecretKey == "" && b.AccessKey != "":
		bad([]string{"store.blob_s3.secret_key", "store.blob_s3", "store"}, "required with access_key (from the environment: secret_key: ${S3_SECRET_KEY})")
	case b.AccessKey == "":
		bad([]string{"store.blob_s3.access_key", "store.blob_s3", "store"}, "required: the access key and secret key that sign the requests")
	}
}

// validBucket reports whether name follows S3's rules for bucket names.
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '.') && i > 0 && i < len(name)-1:
		default:
			return false
		}
	}
	return true
}

// SecretsKeySize is the size of the keys that encrypt the secrets of the
// topology held in the store.
const SecretsKeySize = 32

// parseSecretsKey reads a key of SecretsKeySize bytes in standard base64.
// The errors never quote the value: it is a secret, even when mistyped.
func parseSecretsKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(s))
	switch {
	case err != nil:
		return nil, fmt.Errorf("is not standard base64: give %d random bytes in standard base64 (openssl rand -base64 %d)", SecretsKeySize, SecretsKeySize)
	case len(key) != SecretsKeySize:
		return nil, fmt.Errorf("holds %d bytes, not %d: give %d random bytes in standard base64 (openssl rand -base64 %d)", len(key), SecretsKeySize, SecretsKeySize, SecretsKeySize)
	}
	return key, nil
}

// setBy reports whether the file or the environment set the field.
func (c *Config) setBy(field string) bool {
	_, env := c.envs[field]
	_, file := c.lines[field]
	return env || file
}

// problem locates a problem with a top-level value at the first of fields
// that the environment or the file set: a COURIER_* variable is named as
// the field, a line of the file with the field's path.
func (c *Config) problem(fields []string, msg string) *Error {
	for _, f := range fields {
		if v, ok := c.envs[f]; ok {
			return &Error{Field: v, Message: fields[0] + ": " + msg}
		}
		if l, ok := c.lines[f]; ok {
			return &Error{File: c.File, Line: l, Field: fields[0], Message: msg}
		}
	}
	return &Error{File: c.File, Field: fields[0], Message: msg}
}

// formatSize writes n the way it would be configured.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
