package config

import (
	"strings"
	"testing"
)

const (
	hashA = "sha256:886f6368ba49c2284e40472c43f2592fc28370d286034900a7e900dda01b02f0"
	hashB = "sha256:32323cfa9ec9d62750daad0836a4cf3d7b60d23723b7852a529667deed01669f"
)

// lines joins its arguments one per line, so that a test case's line
// numbers can be counted on the page.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// withRoute is lines after a route erp and the line subscriptions:, so
// that the subscriptions it is given begin at line 4.
func withRoute(ls ...string) string {
	return lines(append([]string{"endpoints: {a: {transport: file, dir: a}}", "routes: {erp: {endpoints: [a]}}", "subscriptions:"}, ls...)...)
}

// TestRules checks each validation rule with the exact file, line and field
// it reports.
func TestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		env  map[string]string
		want []string
	}{
		// Top level.
		{"unknown field with suggestion", lines("listen: 127.0.0.1:1", "lisen: x"),
			nil, []string{`c.yaml:2: lisen: unknown field (did you mean "listen"?)`}},
		{"unknown field", lines("senders: {}"),
			nil, []string{`c.yaml:1: senders: unknown field`}},
		{"field given twice", lines("listen: 127.0.0.1:1", "listen: 127.0.0.1:2"),
			nil, []string{`c.yaml:2: listen: given twice (first at line 1)`}},
		{"listen without port", lines("listen: localhost"),
			nil, []string{`c.yaml:1: listen: "localhost" is not host:port`}},
		{"listen port out of range", lines("listen: 127.0.0.1:99999"),
			nil, []string{`c.yaml:1: listen: "127.0.0.1:99999": the port must be a number from 0 to 65535`}},
		{"listen not a single value", lines("listen: [a]"),
			nil, []string{`c.yaml:1: listen: must be a single value, not a list`}},
		{"tls cert without key", lines("tls: {cert: a.crt}"),
			nil, []string{`c.yaml:1: tls.key: required when tls.cert is set`}},
		{"tls key without cert", lines("tls:", "  key: a.key"),
			nil, []string{`c.yaml:2: tls.cert: required when tls.key is set`}},
		{"tls unknown field", lines("tls: {cert: a, key: b, ca: c}"),
			nil, []string{`c.yaml:1: tls.ca: unknown field`}},
		{"store driver", lines("store: {driver: mysql}"),
			nil, []string{`c.yaml:1: store.driver: must be sqlite or postgres, not "mysql"`}},
		{"postgres without dsn", lines("store:", "  driver: postgres"),
			nil, []string{`c.yaml:2: store.dsn: required with driver postgres: postgres://user:password@host/db`}},
		{"postgres dsn scheme", lines("store:", "  driver: postgres", "  dsn: host=db user=courier"),
			nil, []string{`c.yaml:3: store.dsn: must be a URL starting with postgres:// or postgresql://`}},
		{"sqlite without path", lines(`store: {driver: sqlite, path: ""}`),
			nil, []string{`c.yaml:1: store.path: required with driver sqlite: the database file`}},
		{"blob_s3 without bucket", lines("store:", "  blob_s3:", "    endpoint: http://127.0.0.1:7070", "    access_key: courier", "    secret_key: s"),
			nil, []string{`c.yaml:2: store.blob_s3.bucket: required: the bucket that keeps the blobs`}},
		{"blob_s3 empty", lines("store:", "  blob_s3: {}"),
			nil, []string{`c.yaml:2: store.blob_s3.endpoint: required: the S3 service's URL, such as https://s3.eu-west-1.amazonaws.com`,
				`c.yaml:2: store.blob_s3.bucket: required: the bucket that keeps the blobs`,
				`c.yaml:2: store.blob_s3.access_key: required: the access key and secret key that sign the requests`}},
		{"blob_s3 endpoint with a path", lines("store:", "  blob_s3:", "    endpoint: https://s3.example/blobs", "    bucket: blobs", "    access_key: a", "    secret_key: s"),
			nil, []string{`c.yaml:3: store.blob_s3.endpoint: must be an http or https URL of the S3 service without a path or keys (the bucket goes in bucket, the keys in access_key and secret_key)`}},
		{"blob_s3 endpoint scheme", lines("store: {blob_s3: {endpoint: s3.example:9000, bucket: blobs, access_key: a, secret_key: s}}"),
			nil, []string{`c.yaml:1: store.blob_s3.endpoint: must be an http or https URL of the S3 service without a path or keys (the bucket goes in bucket, the keys in access_key and secret_key)`}},
		{"blob_s3 bucket name", lines("store:", "  blob_s3:", "    endpoint: https://s3.example", "    bucket: Courier_Blobs", "    access_key: a", "    secret_key: s"),
			nil, []string{`c.yaml:4: store.blob_s3.bucket: "Courier_Blobs" is not a bucket name: use 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit`}},
		{"blob_s3 access key without secret", lines("store:", "  blob_s3:", "    endpoint: https://s3.example", "    bucket: blobs", "    access_key: a", "    secret_key: ${S3_SECRET}"),
			map[string]string{"S3_SECRET": ""}, []string{`c.yaml:6: store.blob_s3.secret_key: required with access_key (from the environment: secret_key: ${S3_SECRET_KEY})`}},
		{"blob_s3 with blob_dir", lines("store:", "  driver: postgres", "  dsn: postgres://db/courier", "  blob_dir: /srv/blobs",
			"  blob_s3: {endpoint: https://s3.example, bucket: blobs, access_key: a, secret_key: s}"),
			nil, []string{`c.yaml:5: store.blob_s3: cannot be given with store.blob_dir: the blobs are kept in one place`}},
		{"blob_s3 upload_grace", lines("store:", "  blob_s3:", "    upload_grace: an hour"),
			nil, []string{`c.yaml:2: store.blob_s3.endpoint: required: the S3 service's URL, such as https://s3.eu-west-1.amazonaws.com`,
				`c.yaml:2: store.blob_s3.bucket: required: the bucket that keeps the blobs`,
				`c.yaml:2: store.blob_s3.access_key: required: the access key and secret key that sign the requests`,
				`c.yaml:3: store.blob_s3.upload_grace: "an hour" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"blob_s3 unknown field", lines("store:", "  blob_s3: {endpoint: https://s3.example, bucket: blobs, access_key: a, secret_key: s, secure: true}"),
			nil, []string{`c.yaml:2: store.blob_s3.secure: unknown field`}},
		{"retention zero", lines("retention: 0s"),
			nil, []string{`c.yaml:1: retention: must be greater than 0`}},
		{"retention negative", lines("retention: -1h"),
			nil, []string{`c.yaml:1: retention: duration -1h must not be negative`}},
		{"shutdown timeout zero", lines("shutdown_timeout: 0s"),
			nil, []string{`c.yaml:1: shutdown_timeout: must be greater than 0`}},
		{"shutdown timeout not a duration", lines("shutdown_timeout: soon"),
			nil, []string{`c.yaml:1: shutdown_timeout: "soon" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"retention not a duration", lines("retention: 7d"),
			nil, []string{`c.yaml:1: retention: "7d" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"max_payload not a size", lines("max_payload: 1MB5"),
			nil, []string{`c.yaml:1: max_payload: "1MB5" is not a size: the unit must be one of B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`}},
		{"max_payload zero", lines("max_payload: 0"),
			nil, []string{`c.yaml:1: max_payload: must be greater than 0`}},
		{"max_batch_bytes zero", lines("max_batch_bytes: 0"),
			nil, []string{`c.yaml:1: max_batch_bytes: must be greater than 0`}},
		{"max_payload over the ceiling", lines("max_batch_bytes: 32MiB", "max_payload: 1025MiB"),
			nil, []string{`c.yaml:2: max_payload: must be at most 1GiB`}},
		{"ingest_in_flight max_bytes zero", lines("ingest_in_flight: {max_bytes: 0}"),
			nil, []string{`c.yaml:1: ingest_in_flight.max_bytes: must be greater than 0 (or left out: derived from the memory limit)`}},
		{"ingest_in_flight max_messages negative", lines("ingest_in_flight:", "  max_messages: -1"),
			nil, []string{`c.yaml:2: ingest_in_flight.max_messages: must be greater than 0 (or left out: derived from max_bytes)`}},
		{"ingest_in_flight sender_share over 1", lines("ingest_in_flight:", "  sender_share: 1.5"),
			nil, []string{`c.yaml:2: ingest_in_flight.sender_share: must be greater than 0 and at most 1, not 1.5`}},
		{"ingest_in_flight unknown field", lines("ingest_in_flight: {max_items: 5}"),
			nil, []string{`c.yaml:1: ingest_in_flight.max_items: unknown field`}},
		{"log format", lines("log: {format: xml}"),
			nil, []string{`c.yaml:1: log.format: must be text or json, not "xml"`}},
		{"log level", lines("log:", "  level: verbose"),
			nil, []string{`c.yaml:2: log.level: must be debug, info, warn or error, not "verbose"`}},
		{"tracing endpoint", lines("tracing:", "  endpoint: collector:4318"),
			nil, []string{`c.yaml:2: tracing.endpoint: must be an absolute http or https URL (the OTLP/HTTP collector, e.g. http://collector:4318)`}},
		{"tracing sample", lines("tracing: {endpoint: 'http://127.0.0.1:4318', sample: 1.5}"),
			nil, []string{`c.yaml:1: tracing.sample: must be between 0 and 1, not 1.5`}},
		{"tracing sample not a number", lines("tracing:", "  sample: all"),
			nil, []string{`c.yaml:2: tracing.sample: "all" is not a number`}},
		{"public_url", lines("public_url: courier.example.org"),
			nil, []string{`c.yaml:1: public_url: must be an absolute http or https URL`}},
		{"public_url scheme", lines("public_url: ftp://courier.example.org"),
			nil, []string{`c.yaml:1: public_url: must be an absolute http or https URL`}},
		{"outbound network", lines("outbound:", "  allow_networks: [127.0.0.0/8, 10.0.0.0/33]"),
			nil, []string{`c.yaml:2: outbound.allow_networks[1]: "10.0.0.0/33" is not a network in CIDR notation (10.0.0.0/8, fd00::/8)`}},
		{"outbound networks not a list", lines("outbound: {allow_networks: 10.0.0.0/8}"),
			nil, []string{`c.yaml:1: outbound.allow_networks: must be a list ([a, b] or one "- a" per line), not a single value`}},

		// Keys.
		{"key name", lines("keys:", `  "erp key": {role: admin, hash: "`+hashA+`"}`),
			nil, []string{`c.yaml:2: keys.erp key: "erp key" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"key role missing", lines("keys:", `  erp: {hash: "`+hashA+`"}`),
			nil, []string{`c.yaml:2: keys.erp.role: required: one of sender, operator, admin`}},
		{"key role", lines("keys:", "  erp:", "    role: root", `    hash: "`+hashA+`"`),
			nil, []string{`c.yaml:3: keys.erp.role: must be sender, operator or admin, not "root"`}},
		{"key hash missing", lines("keys:", "  erp: {role: admin}"),
			nil, []string{`c.yaml:2: keys.erp.hash: required: "sha256:" and the lowercase hex SHA-256 of the secret`}},
		{"key hash upper case", lines("keys:", `  erp: {role: admin, hash: "`+strings.ToUpper(hashA[:9])+hashA[9:]+`"}`),
			nil, []string{`c.yaml:2: keys.erp.hash: must be "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the secret`}},
		{"key hash short", lines("keys:", `  erp: {role: admin, hash: "sha256:abc"}`),
			nil, []string{`c.yaml:2: keys.erp.hash: must be "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the secret`}},
		{"key hash without prefix", lines("keys:", `  erp: {role: admin, hash: "`+hashA[7:]+`"}`),
			nil, []string{`c.yaml:2: keys.erp.hash: must be "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the secret`}},
		{"key hash shared", lines("keys:", `  a: {role: admin, hash: "`+hashA+`"}`, `  b: {role: sender, hash: "`+hashA+`"}`),
			nil, []string{`c.yaml:3: keys.b.hash: is the same as the hash of key "a": each key needs its own secret`}},
		{"key rate", lines("keys:", `  erp: {role: sender, hash: "`+hashA+`", rate: 100/d}`),
			nil, []string{`c.yaml:2: keys.erp.rate: rate "100/d": the period must be s, m, h or a positive duration`}},
		{"key max_suspended", lines("keys:", `  erp: {role: sender, hash: "`+hashA+`", max_suspended: 0}`),
			nil, []string{`c.yaml:2: keys.erp.max_suspended: "0" must be a whole number of at least 1, or unlimited`}},
		// With a topology section the file is the topology (with none, the
		// routes are the store's: see TestStoreMode).
		{"key route undefined", lines("keys:", `  erp: {role: sender, hash: "`+hashA+`", routes: [acme]}`, "routes: {}"),
			nil, []string{`c.yaml:2: keys.erp.routes[0]: route "acme" is not defined`}},
		{"key routes for an operator", lines(
			"endpoints: {a: {transport: file, dir: out}}",
			"routes: {acme: {endpoints: [a]}}",
			"keys:",
			`  ops: {role: operator, hash: "`+hashB+`", routes: [acme]}`),
			nil, []string{`c.yaml:4: keys.ops.routes: only sender keys are limited to routes; operator keys reach every route`}},

		// Claim check.
		{"claim_check without public_url", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    claim_check: {above: 1MiB}", "  b: {transport: file, dir: b, claim_check: }"),
			nil, []string{
				`c.yaml:5: endpoints.a.claim_check: needs public_url: the URL in its notices, from which receivers fetch the payload, is built on it; set public_url in this file or COURIER_PUBLIC_URL (courier apply leaves this check to the server)`,
				`c.yaml:6: endpoints.b.claim_check: needs public_url: the URL in its notices, from which receivers fetch the payload, is built on it; set public_url in this file or COURIER_PUBLIC_URL (courier apply leaves this check to the server)`}},
		{"claim_check of a lookup template without public_url", lines("routes:", "  nemhandel:", "    lookup: {url: \"https://registry.example/{recipient}\"}",
			"    endpoint_template:", "      transport: http", "      claim_check: {ttl: 1h}"),
			nil, []string{`c.yaml:6: routes.nemhandel.endpoint_template.claim_check: needs public_url: the URL in its notices, from which receivers fetch the payload, is built on it; set public_url in this file or COURIER_PUBLIC_URL (courier apply leaves this check to the server)`}},
		{"claim_check ttl past retention", lines("public_url: https://courier.example.org", "retention: 24h", "endpoints:", "  a:", "    transport: file",
			"    dir: out", "    claim_check:", "      ttl: 24h"),
			nil, []string{`c.yaml:8: endpoints.a.claim_check.ttl: must be shorter than retention (24h0m0s): a delivered message, and the payload its link fetches, may be purged before the link expires`}},
		{"claim_check with public_url from the environment", lines("endpoints:", "  a: {transport: file, dir: out, claim_check: {}}"),
			map[string]string{"COURIER_PUBLIC_URL": "https://courier.example.org"}, nil},
		{"claim_check fields", lines("public_url: https://courier.example.org", "endpoints:", "  a:", "    transport: http",
			"    url: https://a.example/", "    claim_check:", "      above: 10 parsecs", "      ttl: 500ms", "      tll: 1h"),
			nil, []string{
				`c.yaml:7: endpoints.a.claim_check.above: "10 parsecs" is not a size: the unit must be one of B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`,
				`c.yaml:8: endpoints.a.claim_check.ttl: must be at least 1s`,
				`c.yaml:9: endpoints.a.claim_check.tll: unknown field (did you mean "ttl"?)`}},
		{"claim_check above the ceiling", lines("public_url: https://courier.example.org", "endpoints:", "  a: {transport: file, dir: out, claim_check: {above: 1GiB}}"),
			nil, []string{`c.yaml:3: endpoints.a.claim_check.above: must be less than 1GiB, the largest payload courier takes`}},
		{"claim_check not a mapping", lines("public_url: https://courier.example.org", "endpoints:", "  a: {transport: file, dir: out, claim_check: 10MiB}"),
			nil, []string{`c.yaml:3: endpoints.a.claim_check: must be a mapping of field: value, not a single value`}},

		{"whsec secret not base64", lines("endpoints:", `  a: {transport: http, url: "https://a.example/", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_not*base64!"}`),
			nil, []string{`c.yaml:2: endpoints.a.secret: secret 2 of 2 starts with whsec_ but is not base64 after it (Standard Webhooks secrets are whsec_<base64>)`}},

		// Endpoints: names, transports and their fields.
		{"endpoint name", lines("endpoints:", "  a b: {transport: file, dir: out}"),
			nil, []string{`c.yaml:2: endpoints.a b: "a b" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"endpoints not a mapping", lines("endpoints: [a, b]"),
			nil, []string{`c.yaml:1: endpoints: must be a mapping of name: settings, not a list`}},
		{"endpoint not a mapping", lines("endpoints:", "  a: https://example.org/"),
			nil, []string{`c.yaml:2: endpoints.a: must be a mapping of field: value, not a single value`}},
		{"transport missing", lines("endpoints:", "  a: {dir: out}"),
			nil, []string{`c.yaml:2: endpoints.a.transport: required: one of http, smtp, file, amqp, nats`}},
		{"transport unknown", lines("endpoints:", "  a:", "    transport: ftp"),
			nil, []string{`c.yaml:3: endpoints.a.transport: must be http, smtp, file, amqp or nats, not "ftp"`}},
		{"field of another transport", lines("endpoints:", "  acme:", "    transport: http", "    url: https://acme.example/in", "    dir: /tmp"),
			nil, []string{`c.yaml:5: endpoints.acme.dir: not a field of http endpoints (it belongs to file endpoints)`}},
		{"url on a file endpoint", lines("endpoints:", "  a: {transport: file, dir: out, url: http://x}"),
			nil, []string{`c.yaml:2: endpoints.a.url: not a field of file endpoints (it belongs to http and amqp and nats endpoints)`}},
		{"endpoint unknown field", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    tmeout: 5s"),
			nil, []string{`c.yaml:5: endpoints.a.tmeout: unknown field (did you mean "timeout"?)`}},
		{"endpoint field with two letters swapped", lines("endpoints:", "  acme:", "    transport: http", "    ulr: https://acme.example/in"),
			nil, []string{`c.yaml:2: endpoints.acme.url: required: the receiver's http or https URL`, `c.yaml:4: endpoints.acme.ulr: unknown field (did you mean "url"?)`}},
		{"policy field with two letters swapped", lines("policies:", "  invoice:", "    max_attmepts: 3"),
			nil, []string{`c.yaml:3: policies.invoice.max_attmepts: unknown field (did you mean "max_attempts"?)`}},
		{"http url missing", lines("endpoints:", "  acme: {transport: http}"),
			nil, []string{`c.yaml:2: endpoints.acme.url: required: the receiver's http or https URL`}},
		{"http url scheme", lines("endpoints:", "  acme:", "    transport: http", "    url: ftp://acme.example/in"),
			nil, []string{`c.yaml:4: endpoints.acme.url: must be an absolute http or https URL`}},
		{"http url relative", lines("endpoints:", "  acme: {transport: http, url: /inbox}"),
			nil, []string{`c.yaml:2: endpoints.acme.url: must be an absolute http or https URL`}},
		{"http method", lines("endpoints:", "  acme: {transport: http, url: https://a.example/, method: FETCH}"),
			nil, []string{`c.yaml:2: endpoints.acme.method: must be one of POST, PUT, PATCH, GET, DELETE, HEAD, OPTIONS, not "FETCH"`}},
		{"http secret empty", lines("endpoints:", "  acme: {transport: http, url: https://a.example/, secret: '${SECRET}'}"),
			map[string]string{"SECRET": " "}, []string{`c.yaml:2: endpoints.acme.secret: is empty; leave the field out to send unsigned requests`}},
		{"http secret unset", lines("endpoints:", "  acme:", "    transport: http", "    url: https://a.example/", "    secret: ${ACME_SECRET}"),
			nil, []string{`c.yaml:5: endpoints.acme.secret: environment variable ACME_SECRET is not set`}},
		{"http follow_redirects", lines("endpoints:", "  acme: {transport: http, url: https://a.example/, follow_redirects: maybe}"),
			nil, []string{`c.yaml:2: endpoints.acme.follow_redirects: "maybe" is not true or false`}},
		{"http allow_networks", lines("endpoints:", "  acme: {transport: http, url: https://a.example/, allow_networks: [10.0.0.1]}"),
			nil, []string{`c.yaml:2: endpoints.acme.allow_networks[0]: "10.0.0.1" is not a network in CIDR notation (10.0.0.0/8, fd00::/8)`}},
		{"http header courier sets", lines("endpoints:", "  acme:", "    transport: http", "    url: https://a.example/",
			"    headers: {X-Region: eu, courier-type: x, webhook-signature: y, traceparent: z, Content-Length: '1', Host: h}"),
			nil, []string{
				`c.yaml:5: endpoints.acme.headers.courier-type: Courier-Type is set by courier itself (docs/design.md §8) and cannot be overridden`,
				`c.yaml:5: endpoints.acme.headers.webhook-signature: Webhook-Signature is set by courier itself (docs/design.md §8) and cannot be overridden`,
				`c.yaml:5: endpoints.acme.headers.traceparent: Traceparent is set by courier itself (docs/design.md §8) and cannot be overridden`,
				`c.yaml:5: endpoints.acme.headers.Content-Length: Content-Length is set by courier itself (docs/design.md §8) and cannot be overridden`,
				`c.yaml:5: endpoints.acme.headers.Host: Host is set by courier itself (docs/design.md §8) and cannot be overridden`}},
		{"http header twice and bad", lines("endpoints:", "  acme:", "    transport: http", "    url: https://a.example/",
			"    headers:", "      X-Key: {secret: a}", "      x-key: b", "      'bad name': c", "      X-Empty: {secret: ''}", "      X-None: {}"),
			nil, []string{
				`c.yaml:7: endpoints.acme.headers.x-key: is X-Key again: header names are case-insensitive`,
				`c.yaml:8: endpoints.acme.headers.bad name: is not a valid HTTP header name`,
				`c.yaml:9: endpoints.acme.headers.X-Empty: is empty: give the header's value, or leave the header out`,
				`c.yaml:10: endpoints.acme.headers.X-None.secret: required: the header's value, kept secret`}},
		{"http auth", lines("endpoints:", "  a: {transport: http, url: https://a.example/, auth: {}}",
			"  b: {transport: http, url: https://a.example/, auth: {bearer: t, basic: {username: u, password: p}}}",
			"  c: {transport: http, url: https://a.example/, auth: {oauth2: {token_url: 'ftp://x', scopes: ['a b']}}}",
			"  d: {transport: http, url: https://a.example/, auth: {bearer: t}, headers: {authorization: x}}",
			"  e: {transport: http, url: https://a.example/, auth: {basic: {username: 'a:b'}}}",
			"  f: {transport: http, url: https://a.example/, auth: {bearer: '${UNSET}'}}",
			"  g: {transport: http, url: https://a.example/, auth: {bearer: ''}}",
			"  h: {transport: http, url: https://a.example/, auth: {oauth2: {token_url: 'https://t.example/', client_id: c, client_secret: ''}}}"),
			nil, []string{
				`c.yaml:2: endpoints.a.auth: give one of basic, bearer and oauth2`,
				`c.yaml:3: endpoints.b.auth: gives basic and bearer: give one of them`,
				`c.yaml:4: endpoints.c.auth.oauth2.token_url: must be an absolute http or https URL`,
				`c.yaml:4: endpoints.c.auth.oauth2.client_id: required: the client's id at the authorization server`,
				`c.yaml:4: endpoints.c.auth.oauth2.client_secret: required: the client's secret at the authorization server`,
				`c.yaml:4: endpoints.c.auth.oauth2.scopes[0]: "a b" is not a scope (a scope has no spaces, quotes or backslashes)`,
				`c.yaml:5: endpoints.d.headers.authorization: Authorization is set by auth.bearer: leave one of them out`,
				`c.yaml:6: endpoints.e.auth.basic.username: must not contain a colon (HTTP Basic authentication cannot carry one)`,
				`c.yaml:6: endpoints.e.auth.basic.password: required: the password of HTTP Basic authentication`,
				`c.yaml:7: endpoints.f.auth.bearer: environment variable UNSET is not set`,
				`c.yaml:8: endpoints.g.auth.bearer: is empty: give the token the receiver expects after "Bearer "`,
				`c.yaml:9: endpoints.h.auth.oauth2.client_secret: is empty`}},
		{"http auth good", lines("endpoints:",
			"  a: {transport: http, url: https://a.example/, auth: {oauth2: {token_url: 'https://auth.example/token', client_id: c, client_secret: '${S}', scopes: [a, b], audience: x}}, headers: {X-Key: {secret: k}, X-Region: eu}}",
			"  b: {transport: http, url: https://a.example/, auth: {basic: {username: u, password: p}}, headers: {Authorization-Extra: x}}",
			"routes: {r: {endpoints: [a, b]}}"),
			map[string]string{"S": "s3"}, nil},
		{"auth in the health lists", lines("endpoints:", "  a: {transport: http, url: https://a.example/, suspend_on: [auth], timeout_on: [lookup]}"),
			nil, []string{
				`c.yaml:2: endpoints.a.timeout_on[0]: lookup failures happen before the receiver is reached and never touch its health (docs/design.md §4): leave lookup out`,
				`c.yaml:2: endpoints.a.suspend_on[0]: auth failures happen before the receiver is reached and never touch its health (docs/design.md §4): leave auth out`}},
		{"smtp fields missing", lines("endpoints:", "  m: {transport: smtp}"),
			nil, []string{
				`c.yaml:2: endpoints.m.addr: required: the mail server's host:port`,
				`c.yaml:2: endpoints.m.from: required: the sender address`,
				`c.yaml:2: endpoints.m.to: required: a list of recipient addresses`}},
		{"smtp addr", lines("endpoints:", "  m: {transport: smtp, addr: mail.example.org, from: a@example.org, to: [b@example.org]}"),
			nil, []string{`c.yaml:2: endpoints.m.addr: "mail.example.org" is not host:port`}},
		{"smtp addr port", lines("endpoints:", "  m: {transport: smtp, addr: 'mail.example.org:0', from: a@example.org, to: [b@example.org]}"),
			nil, []string{`c.yaml:2: endpoints.m.addr: "mail.example.org:0": the port must be a number from 1 to 65535`}},
		{"smtp addr host", lines("endpoints:", "  m: {transport: smtp, addr: ':25', from: a@example.org, to: [b@example.org]}"),
			nil, []string{`c.yaml:2: endpoints.m.addr: ":25" has no host`}},
		{"smtp from", lines("endpoints:", "  m: {transport: smtp, addr: 'mx:25', from: courier, to: [b@example.org]}"),
			nil, []string{`c.yaml:2: endpoints.m.from: "courier" is not a mail address`}},
		{"smtp to empty", lines("endpoints:", "  m: {transport: smtp, addr: 'mx:25', from: a@example.org, to: []}"),
			nil, []string{`c.yaml:2: endpoints.m.to: must list at least one address`}},
		{"smtp to address", lines("endpoints:", "  m:", "    transport: smtp", "    addr: mx:25", "    from: a@example.org", "    to:", "      - b@example.org", "      - ops"),
			nil, []string{`c.yaml:8: endpoints.m.to[1]: "ops" is not a mail address`}},
		{"smtp password without username", lines("endpoints:", "  m: {transport: smtp, addr: 'mx:25', from: a@example.org, to: [b@example.org], password: x}"),
			nil, []string{`c.yaml:2: endpoints.m.username: required when password is set`}},
		{"smtp starttls", lines("endpoints:", "  m: {transport: smtp, addr: 'mx:25', from: a@example.org, to: [b@example.org], starttls: yes}"),
			nil, []string{`c.yaml:2: endpoints.m.starttls: must be auto, always or never, not "yes"`}},
		{"file dir missing", lines("endpoints:", "  f: {transport: file}"),
			nil, []string{`c.yaml:2: endpoints.f.dir: required: the directory files are written to`}},
		{"file name with a slash", lines("endpoints:", "  f: {transport: file, dir: out, name: '{type}/{id}'}"),
			nil, []string{`c.yaml:2: endpoints.f.name: must be a name without / or \: files stay in dir`}},
		{"file name placeholder", lines("endpoints:", "  f: {transport: file, dir: out, name: '{uuid}.xml'}"),
			nil, []string{`c.yaml:2: endpoints.f.name: {uuid} is not a placeholder: use {id}, {type} or {time}`}},
		{"file name brace", lines("endpoints:", "  f: {transport: file, dir: out, name: '{id.xml'}"),
			nil, []string{`c.yaml:2: endpoints.f.name: has a { without }`}},
		{"amqp url", lines("endpoints:", "  q: {transport: amqp, url: 'http://broker', routing_key: k}"),
			nil, []string{`c.yaml:2: endpoints.q.url: must be an amqp:// or amqps:// URL`}},
		{"amqp routing key", lines("endpoints:", "  q: {transport: amqp, url: 'amqp://broker', exchange: ''}"),
			nil, []string{`c.yaml:2: endpoints.q.routing_key: required with the default exchange: it routes by queue name`}},
		{"nats url", lines("endpoints:", "  n: {transport: nats, url: 'nats://a:4222,b:4222', subject: s}"),
			nil, []string{`c.yaml:2: endpoints.n.url: must be a nats:// or tls:// URL (several separated by commas)`}},
		{"nats subject", lines("endpoints:", "  n: {transport: nats, url: 'nats://a:4222', subject: 'out.*'}"),
			nil, []string{`c.yaml:2: endpoints.n.subject: "out.*" is not a subject to publish on: dot-separated tokens without spaces or the wildcards * and >`}},
		{"nats subject missing", lines("endpoints:", "  n: {transport: nats, url: 'nats://a:4222'}"),
			nil, []string{`c.yaml:2: endpoints.n.subject: required: the subject to publish on`}},

		// Endpoints: limits and health rules.
		{"timeout zero", lines("endpoints:", "  a: {transport: file, dir: out, timeout: 0s}"),
			nil, []string{`c.yaml:2: endpoints.a.timeout: must be greater than 0`}},
		{"max_concurrency zero", lines("endpoints:", "  a: {transport: file, dir: out, max_concurrency: 0}"),
			nil, []string{`c.yaml:2: endpoints.a.max_concurrency: must be at least 1`}},
		{"max_concurrency word", lines("endpoints:", "  a: {transport: file, dir: out, max_concurrency: many}"),
			nil, []string{`c.yaml:2: endpoints.a.max_concurrency: "many" is neither a whole number nor auto`}},
		{"max_concurrency_ceiling without auto", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    max_concurrency: 4", "    max_concurrency_ceiling: 8"),
			nil, []string{`c.yaml:6: endpoints.a.max_concurrency_ceiling: only with max_concurrency: auto (a fixed max_concurrency is its own ceiling)`}},
		{"max_concurrency_ceiling zero", lines("endpoints:", "  a: {transport: file, dir: out, max_concurrency: auto, max_concurrency_ceiling: 0}"),
			nil, []string{`c.yaml:2: endpoints.a.max_concurrency_ceiling: must be at least 1`}},
		{"max_concurrency_ceiling word", lines("endpoints:", "  a: {transport: file, dir: out, max_concurrency: auto, max_concurrency_ceiling: lots}"),
			nil, []string{`c.yaml:2: endpoints.a.max_concurrency_ceiling: "lots" is not a whole number`}},
		{"max_concurrency_ceiling in a template without auto", lines("routes:", "  r:", "    lookup: {url: 'https://smp.example/{recipient}'}", "    endpoint_template: {max_concurrency_ceiling: 8}"),
			nil, []string{`c.yaml:4: routes.r.endpoint_template.max_concurrency_ceiling: only with max_concurrency: auto (a fixed max_concurrency is its own ceiling)`}},
		{"min_interval negative", lines("endpoints:", "  a: {transport: file, dir: out, min_interval: -1s}"),
			nil, []string{`c.yaml:2: endpoints.a.min_interval: duration -1s must not be negative`}},
		{"rate", lines("endpoints:", "  a: {transport: file, dir: out, rate: 100}"),
			nil, []string{`c.yaml:2: endpoints.a.rate: rate "100": want N/s, N/m, N/h or N/<duration>`}},
		{"error class", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    timeout_on: [timeout, http_500]"),
			nil, []string{`c.yaml:5: endpoints.a.timeout_on[1]: "http_500" is not an error class (did you mean "http_5xx"?)`}},
		{"error class listed twice", lines("endpoints:", "  a: {transport: file, dir: out, permanent: [rejected, rejected]}"),
			nil, []string{`c.yaml:2: endpoints.a.permanent[1]: rejected is listed twice`}},
		{"class in both lists", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    timeout_on: [timeout, http_5xx]", "    suspend_on: [dns, http_5xx]"),
			nil, []string{`c.yaml:6: endpoints.a.suspend_on[1]: http_5xx is in timeout_on too; a class either counts towards suspension or suspends at once`}},
		{"retries_before_suspension", lines("endpoints:", "  a: {transport: file, dir: out, retries_before_suspension: -1}"),
			nil, []string{`c.yaml:2: endpoints.a.retries_before_suspension: must not be negative`}},
		{"suspension initial", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    suspension: {initial: 0s}"),
			nil, []string{`c.yaml:5: endpoints.a.suspension.initial: must be greater than 0`}},
		{"suspension factor", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    suspension:", "      factor: 0.5"),
			nil, []string{`c.yaml:6: endpoints.a.suspension.factor: must be at least 1`}},
		{"suspension max", lines("endpoints:", "  a:", "    transport: file", "    dir: out", "    suspension:", "      initial: 1m", "      max: 30s"),
			nil, []string{`c.yaml:7: endpoints.a.suspension.max: must be at least initial (1m0s)`}},
		{"suspension initial over default max", lines("endpoints:", "  a: {transport: file, dir: out, suspension: {initial: 2h}}"),
			nil, []string{`c.yaml:2: endpoints.a.suspension.initial: must not exceed max (1h0m0s)`}},
		{"suspension jitter", lines("endpoints:", "  a: {transport: file, dir: out, suspension: {jitter: 0.1}}"),
			nil, []string{`c.yaml:2: endpoints.a.suspension.jitter: unknown field`}},

		// Routes.
		{"route name", lines("routes:", "  'a b': {endpoints: [x]}", "endpoints: {x: {transport: file, dir: out}}"),
			nil, []string{`c.yaml:2: routes.a b: "a b" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"route endpoints missing", lines("routes:", "  acme: {strategy: failover}"),
			nil, []string{`c.yaml:2: routes.acme.endpoints: required: a list of endpoint names (or a workflow: of steps, or a lookup: of recipients)`}},
		{"route endpoints empty", lines("routes:", "  acme: {endpoints: []}"),
			nil, []string{`c.yaml:2: routes.acme.endpoints: must list at least one endpoint`}},
		{"route endpoints not a list", lines("endpoints: {a: {transport: file, dir: out}}", "routes:", "  acme: {endpoints: a}"),
			nil, []string{`c.yaml:3: routes.acme.endpoints: must be a list ([a, b] or one "- a" per line), not a single value`}},
		{"route endpoint undefined", lines(
			"endpoints:",
			"  acme-primary: {transport: http, url: https://a.example/}",
			"  acme-backup: {transport: http, url: https://b.example/}",
			"routes:",
			"  acme:",
			"    endpoints:",
			"      - acme-primary",
			"      - acme-bakup"),
			nil, []string{`c.yaml:8: routes.acme.endpoints[1]: endpoint "acme-bakup" is not defined (did you mean "acme-backup"?)`}},
		{"route endpoint twice", lines("endpoints: {a: {transport: file, dir: out}}", "routes:", "  r: {endpoints: [a, a]}"),
			nil, []string{`c.yaml:3: routes.r.endpoints[1]: endpoint "a" is listed twice`}},
		{"route strategy", lines("endpoints: {a: {transport: file, dir: out}}", "routes:", "  r: {endpoints: [a], strategy: random}"),
			nil, []string{`c.yaml:3: routes.r.strategy: must be single, failover, round_robin or weighted, not "random"`}},
		{"single with two endpoints", lines("endpoints: {a: {transport: file, dir: a}, b: {transport: file, dir: b}}", "routes:", "  r:", "    endpoints: [a, b]", "    strategy: single"),
			nil, []string{`c.yaml:5: routes.r.strategy: single takes one endpoint and this route has 2; use failover, round_robin or weighted`}},
		{"weights without weighted", lines("endpoints: {a: {transport: file, dir: a}, b: {transport: file, dir: b}}", "routes:", "  r:", "    endpoints: [a, b]", "    weights: {a: 2}"),
			nil, []string{`c.yaml:5: routes.r.weights: only for strategy weighted`}},
		{"weight of another endpoint", lines("endpoints: {a: {transport: file, dir: a}, b: {transport: file, dir: b}}", "routes:", "  r:", "    endpoints: [a]", "    strategy: weighted", "    weights:", "      b: 2"),
			nil, []string{`c.yaml:7: routes.r.weights.b: "b" is not an endpoint of this route`}},
		{"weight zero", lines("endpoints: {a: {transport: file, dir: a}, b: {transport: file, dir: b}}", "routes:", "  r:", "    endpoints: [a, b]", "    strategy: weighted", "    weights: {a: 0, b: x}"),
			nil, []string{`c.yaml:6: routes.r.weights.a: must be at least 1`, `c.yaml:6: routes.r.weights.b: "x" is not a whole number`}},
		{"weights with an unknown strategy", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r: {endpoints: [a], strategy: wieghted, weights: {a: 1}}"),
			nil, []string{`c.yaml:3: routes.r.strategy: must be single, failover, round_robin or weighted, not "wieghted"`}},
		{"empty list entry", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r:", "    endpoints:", "      - a", "      -"),
			nil, []string{`c.yaml:6: routes.r.endpoints[1]: empty entry`}},
		// Workflows.
		{"workflow with endpoints", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  w:", "    endpoints: [a]", "    workflow: [{endpoint: a}]"),
			nil, []string{`c.yaml:4: routes.w.endpoints: not a field of a workflow route: its steps name their endpoints`}},
		{"workflow steps", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  w:", "    workflow:", "      - {endpoint: a, compensate: a-cancl}", "      - {compensate: a}", "      - {endpoint: b, undo: a}", "    compensation_policy: slow"),
			nil, []string{`c.yaml:5: routes.w.workflow[0].compensate: endpoint "a-cancl" is not defined`,
				`c.yaml:6: routes.w.workflow[1].endpoint: required: the endpoint of this step`,
				`c.yaml:7: routes.w.workflow[2].undo: unknown field`,
				`c.yaml:7: routes.w.workflow[2].endpoint: endpoint "b" is not defined`,
				`c.yaml:8: routes.w.compensation_policy: policy "slow" is not defined`}},
		{"fallback to a workflow", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  w: {workflow: [{endpoint: a}]}", "policies:", "  invoice: {fallback: {route: w}}"),
			nil, []string{`c.yaml:5: policies.invoice.fallback.route: route "w" is a workflow route: messages enter a workflow when they are sent, not by falling back`}},
		{"workflow with a lookup", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  w:", "    workflow: [{endpoint: a}]", "    lookup: {url: \"https://reg.example/{recipient}\"}"),
			nil, []string{`c.yaml:5: routes.w.lookup: not a field of a workflow route: its steps name their endpoints`}},
		{"workflow fields on another route", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r:", "    endpoints: [a]", "    envelope: true", "    compensation_policy: nope"),
			nil, []string{`c.yaml:5: routes.r.envelope: only a workflow route has it`, `c.yaml:6: routes.r.compensation_policy: only a workflow route has it`}},
		{"workflow empty", lines("routes:", "  w: {workflow: []}"),
			nil, []string{`c.yaml:2: routes.w.workflow: must list the steps: - {endpoint: a, compensate: a-cancel}`}},
		// Lookup routes.
		{"lookup route fields", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  nh:", "    endpoints: [a]", "    lookup: {url: \"https://reg.example/{recipient}\"}"),
			nil, []string{`c.yaml:4: routes.nh.endpoints: not a field of a lookup route: its endpoint is resolved for each recipient`}},
		{"lookup values", lines("routes:", "  nh:", "    lookup: {url: \"https://reg.example/x\", timeout: 0s, cache_ttl: soon}", "    endpoint_template: {transport: smtp, url: \"https://x\", min_interval: 10s}"),
			nil, []string{`c.yaml:3: routes.nh.lookup.url: must contain {recipient}, where the message's recipient goes`,
				`c.yaml:3: routes.nh.lookup.timeout: must be greater than 0`,
				`c.yaml:3: routes.nh.lookup.cache_ttl: "soon" is not a duration: write a Go duration such as 30s, 5m or 48h`,
				`c.yaml:4: routes.nh.endpoint_template.transport: resolved endpoints are http endpoints, not "smtp"`,
				`c.yaml:4: routes.nh.endpoint_template.url: not a field of the template: the registry gives each resolved endpoint its URL`}},
		{"template without lookup", lines("routes:", "  nh: {endpoint_template: {timeout: 5s}}"),
			nil, []string{`c.yaml:2: routes.nh.lookup: required with endpoint_template: the registry that resolves recipients ({url: ...})`,
				`c.yaml:2: routes.nh.lookup.url: required: the registry's URL, with {recipient} (and {type})`}},
		// Receive locations.
		{"receiver without transport", lines("receivers:", "  in: {type: t, route: r}", "endpoints: {a: {transport: file, dir: a}}", "routes: {r: {endpoints: [a]}}"),
			nil, []string{`c.yaml:2: receivers.in.transport: required: one of amqp, nats, dir`}},
		{"receiver of an unknown transport", lines("receivers:", "  in: {transport: ftp, type: t, route: r}", "endpoints: {a: {transport: file, dir: a}}", "routes: {r: {endpoints: [a]}}"),
			nil, []string{`c.yaml:2: receivers.in.transport: must be amqp, nats or dir, not "ftp"`}},
		{"receiver field of another transport", lines("receivers:", "  in: {transport: dir, path: /in, queue: q, type: t, route: r}", "endpoints: {a: {transport: file, dir: a}}", "routes: {r: {endpoints: [a]}}"),
			nil, []string{`c.yaml:2: receivers.in.queue: not a field of dir receivers`}},
		// Without a route (or route_header) the items are published by type.
		{"receiver without type", lines("receivers:", "  in:", "    transport: amqp", "    url: amqp://h/", "    queue: q"),
			nil, []string{`c.yaml:2: receivers.in.type: required (or type_header): the type of the messages, or the header that carries it`}},
		{"receiver of an undefined route", lines("endpoints: {a: {transport: file, dir: a}}", "routes: {acme: {endpoints: [a]}}", "receivers:", "  in: {transport: nats, url: nats://h, stream: S, type: t, route: acm}"),
			nil, []string{`c.yaml:4: receivers.in.route: route "acm" is not defined (did you mean "acme"?)`}},
		{"receiver values", lines("receivers:", "  in:", "    transport: dir", "    path: /in", "    pattern: \"[x\"", "    settle: 0s", "    type: \"in voice\"", "    route_header: \"x route\"", "    batch: 0", "    on_error: drop"),
			nil, []string{`c.yaml:5: receivers.in.pattern: "[x" is not a pattern of file names (*.xml, invoice-*.json)`,
				`c.yaml:6: receivers.in.settle: must be greater than 0`,
				`c.yaml:7: receivers.in.type: "in voice" is not a valid type: use letters, digits, '.', '_' or '-'`,
				`c.yaml:8: receivers.in.route_header: "x route" is not a header name`,
				`c.yaml:9: receivers.in.batch: must be from 1 to 10000`,
				`c.yaml:10: receivers.in.on_error: must be suspend or stop, not "drop"`}},
		{"receiver amqp url and missing queue", lines("receivers:", "  in: {transport: amqp, url: http://h/, type: t, route_header: x-route}"),
			nil, []string{`c.yaml:2: receivers.in.url: must be an amqp:// or amqps:// URL`, `c.yaml:2: receivers.in.queue: required: the queue to consume`}},
		{"ordered_on_failure", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r: {endpoints: [a], ordered_on_failure: wait}"),
			nil, []string{`c.yaml:3: routes.r.ordered_on_failure: must be block or skip, not "wait"`}},
		{"redrive reasons", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r:", "    endpoints: [a]", "    redrive:",
			"      on_recovery: yes", "      reasons: [rejected, invalid, tired, exhausted, exhausted]", "      max_age: 0s", "      every: 1m"),
			nil, []string{`c.yaml:6: routes.r.redrive.on_recovery: "yes" is not true or false`,
				`c.yaml:7: routes.r.redrive.reasons[0]: rejected messages are never re-driven: they would fail again`,
				`c.yaml:7: routes.r.redrive.reasons[1]: invalid messages are never re-driven: they would fail again`,
				`c.yaml:7: routes.r.redrive.reasons[2]: "tired" is not a suspension reason`,
				`c.yaml:7: routes.r.redrive.reasons[4]: "exhausted" is listed twice`,
				`c.yaml:8: routes.r.redrive.max_age: must be greater than 0`,
				`c.yaml:9: routes.r.redrive.every: unknown field`}},
		{"redrive empty reasons", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  r: {endpoints: [a], redrive: {reasons: []}}"),
			nil, []string{`c.yaml:3: routes.r.redrive.reasons: must list at least one suspension reason (default [exhausted, expired])`}},
		{"redrive of a workflow", lines("endpoints: {a: {transport: file, dir: a}}", "routes:", "  w:", "    workflow: [{endpoint: a}]", "    redrive: {on_recovery: true}"),
			nil, []string{`c.yaml:5: routes.w.redrive: only a route with endpoints of its own has it`}},

		// Policies.
		{"policy name", lines("policies:", "  'an invoice': {priority: 1}"),
			nil, []string{`c.yaml:2: policies.an invoice: "an invoice" is not a message type: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"policy unknown field", lines("policies:", "  invoice:", "    max_atempts: 3"),
			nil, []string{`c.yaml:3: policies.invoice.max_atempts: unknown field (did you mean "max_attempts"?)`}},
		{"backoff initial", lines("policies:", "  default:", "    backoff: {initial: 0s}"),
			nil, []string{`c.yaml:3: policies.default.backoff.initial: must be greater than 0`}},
		{"backoff factor", lines("policies:", "  invoice:", "    backoff:", "      factor: 0.5"),
			nil, []string{`c.yaml:4: policies.invoice.backoff.factor: must be at least 1`}},
		{"backoff max under inherited initial", lines("policies:", "  default: {backoff: {initial: 1m}}", "  invoice:", "    backoff: {max: 10s}"),
			nil, []string{`c.yaml:4: policies.invoice.backoff.max: must be at least initial (1m0s)`}},
		{"backoff jitter", lines("policies:", "  invoice: {backoff: {jitter: 1.5}}"),
			nil, []string{`c.yaml:2: policies.invoice.backoff.jitter: must be from 0 to 1 (a fraction of the delay)`}},
		{"backoff jitter negative", lines("policies:", "  invoice: {backoff: {jitter: -0.1}}"),
			nil, []string{`c.yaml:2: policies.invoice.backoff.jitter: must be from 0 to 1 (a fraction of the delay)`}},
		{"schedule and max_attempts", lines("policies:", "  invoice:", "    schedule: [1m, 5m]", "    max_attempts: 3"),
			nil, []string{`c.yaml:4: policies.invoice.max_attempts: a schedule sets max_attempts (its length + 1); give one of them`}},
		{"schedule and backoff", lines("policies:", "  invoice:", "    backoff: {initial: 1m}", "    schedule: [1m, 5m]"),
			nil, []string{`c.yaml:3: policies.invoice.backoff: a schedule replaces backoff; give one of them`}},
		{"schedule empty", lines("policies:", "  invoice:", "    schedule: []"),
			nil, []string{`c.yaml:3: policies.invoice.schedule: must list at least one delay (for no retries use max_attempts: 1)`}},
		{"schedule delay zero", lines("policies:", "  invoice:", "    schedule:", "      - 1m", "      - 0s"),
			nil, []string{`c.yaml:5: policies.invoice.schedule[1]: must be greater than 0`}},
		{"schedule delay unit", lines("policies:", "  invoice: {schedule: [1m, 5]}"),
			nil, []string{`c.yaml:2: policies.invoice.schedule[1]: "5" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"max_attempts", lines("policies:", "  invoice: {max_attempts: 0}"),
			nil, []string{`c.yaml:2: policies.invoice.max_attempts: must be at least 1 (1: no retries)`}},
		{"max_age", lines("policies:", "  invoice: {max_age: 0s}"),
			nil, []string{`c.yaml:2: policies.invoice.max_age: must be greater than 0`}},
		{"priority", lines("policies:", "  invoice: {priority: 10}"),
			nil, []string{`c.yaml:2: policies.invoice.priority: must be from 0 to 9`}},
		{"escalate after", lines("endpoints: {mail: {transport: smtp, addr: 'mx:25', from: a@example.org, to: [b@example.org]}}", "policies:", "  invoice:", "    escalate:", "      - after: 0s", "        notify: mail"),
			nil, []string{`c.yaml:5: policies.invoice.escalate[0].after: must be greater than 0`}},
		{"escalate notify undefined", lines("policies:", "  invoice:", "    escalate:", "      - {after: 24h, notify: ops-mail}"),
			nil, []string{`c.yaml:4: policies.invoice.escalate[0].notify: endpoint "ops-mail" is not defined`}},
		{"escalate notify transport", lines("endpoints: {vans: {transport: file, dir: out}}", "policies:", "  invoice:", "    escalate: [{after: 24h, notify: vans}]"),
			nil, []string{`c.yaml:4: policies.invoice.escalate[0].notify: endpoint "vans" is a file endpoint; notices go to smtp or http endpoints`}},
		{"escalate notify missing", lines("policies:", "  invoice:", "    escalate:", "      - after: 24h"),
			nil, []string{`c.yaml:4: policies.invoice.escalate[0].notify: required: an smtp or http endpoint`}},
		{"escalate empty entry", lines("policies:", "  invoice:", "    escalate: [~]"),
			nil, []string{`c.yaml:3: policies.invoice.escalate[0]: empty entry; write {after: ..., notify: ...}`}},
		{"escalate not a list", lines("policies:", "  invoice:", "    escalate: {after: 24h, notify: x}"),
			nil, []string{`c.yaml:3: policies.invoice.escalate: must be a list of {after, notify}, not a mapping`}},
		{"fallback route undefined", lines("routes: {vans: {endpoints: [v]}}", "endpoints: {v: {transport: file, dir: out}}", "policies:", "  invoice:", "    fallback: {after: 48h, route: van}"),
			nil, []string{`c.yaml:5: policies.invoice.fallback.route: route "van" is not defined (did you mean "vans"?)`}},
		{"fallback after negative", lines("routes: {vans: {endpoints: [v]}}", "endpoints: {v: {transport: file, dir: out}}", "policies:", "  invoice:", "    fallback:", "      after: -1h", "      route: vans"),
			nil, []string{`c.yaml:6: policies.invoice.fallback.after: duration -1h must not be negative`}},
		{"fallback route missing", lines("policies:", "  invoice:", "    fallback: {after: 1h}"),
			nil, []string{`c.yaml:3: policies.invoice.fallback.route: required: the route that takes over`}},
		{"fallback not a mapping", lines("policies:", "  invoice:", "    fallback: vans"),
			nil, []string{`c.yaml:3: policies.invoice.fallback: must be a mapping of field: value, not a single value`}},
		{"on_exhausted", lines("policies:", "  invoice: {on_exhausted: retry}"),
			nil, []string{`c.yaml:2: policies.invoice.on_exhausted: must be suspend or discard, not "retry"`}},

		// Subscriptions; withRoute puts them after the route erp, at line 4.
		{"subscriptions not a mapping", lines("subscriptions: [erp-orders]"),
			nil, []string{`c.yaml:1: subscriptions: must be a mapping of name: settings, not a list`}},
		{"subscription name", withRoute("  'erp orders': {types: [order.*], route: erp}"),
			nil, []string{`c.yaml:4: subscriptions.erp orders: "erp orders" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"subscription not a mapping", withRoute("  erp-orders: erp"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders: must be a mapping of field: value, not a single value`}},
		{"subscription unknown field", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    headers: {X-Tenant: acme}"),
			nil, []string{`c.yaml:7: subscriptions.erp-orders.headers: unknown field`}},
		{"subscription unknown field with suggestion", withRoute("  erp-orders:", "    types: [order.*]", "    rout: erp"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.route: required: the route that delivers this subscription's messages`,
				`c.yaml:6: subscriptions.erp-orders.rout: unknown field (did you mean "route"?)`}},
		{"subscription types missing", withRoute("  erp-orders: {route: erp}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.types: required: a list of message types (order.created) or prefixes of types (order.*)`}},
		{"subscription types empty", withRoute("  erp-orders:", "    types: []", "    route: erp"),
			nil, []string{`c.yaml:5: subscriptions.erp-orders.types: must list at least one type`}},
		{"subscription types not a list", withRoute("  erp-orders: {types: order.*, route: erp}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.types: must be a list ([a, b] or one "- a" per line), not a single value`}},
		{"subscription type patterns", withRoute("  erp-orders:", "    types:", "      - order*", "      - .*", `      - "*"`, "      - order.*.*", "      - order created", "      - order.created", "    route: erp"),
			nil, []string{
				`c.yaml:6: subscriptions.erp-orders.types[0]: "order*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`,
				`c.yaml:7: subscriptions.erp-orders.types[1]: ".*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`,
				`c.yaml:8: subscriptions.erp-orders.types[2]: "*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`,
				`c.yaml:9: subscriptions.erp-orders.types[3]: "order.*.*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`,
				`c.yaml:10: subscriptions.erp-orders.types[4]: "order created" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`}},
		{"subscription type listed twice", withRoute("  erp-orders: {types: [order.*, invoice.sent, order.*], route: erp}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.types[2]: "order.*" is listed twice`}},
		{"subscription route missing", withRoute("  erp-orders: {types: [order.*]}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.route: required: the route that delivers this subscription's messages`}},
		{"subscription route not a single value", withRoute("  erp-orders: {types: [order.*], route: [erp]}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.route: must be a single value, not a list`}},
		{"subscription route undefined", withRoute("  erp-orders:", "    types: [order.*]", "    route: erpp"),
			nil, []string{`c.yaml:6: subscriptions.erp-orders.route: route "erpp" is not defined (did you mean "erp"?)`}},
		{"subscription without routes", lines("subscriptions:", "  erp-orders: {types: [order.*], route: erp}"),
			nil, []string{`c.yaml:2: subscriptions.erp-orders.route: route "erp" is not defined`}},
		{"subscription to a notice route", withRoute("  erp-orders: {types: [order.*], route: courier.notice.a}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.route: route "courier.notice.a" is not defined`}},
		{"subscription filter not a mapping", withRoute("  erp-orders: {types: [order.*], route: erp, filter: acme}"),
			nil, []string{`c.yaml:4: subscriptions.erp-orders.filter: must be a mapping of field: value, not a single value`}},
		{"subscription filter unknown field", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      tenant: acme"),
			nil, []string{`c.yaml:8: subscriptions.erp-orders.filter.tenant: unknown field`}},
		{"subscription headers not a mapping", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter: {headers: [X-Tenant]}"),
			nil, []string{`c.yaml:7: subscriptions.erp-orders.filter.headers: must be a mapping of header: value ({X-Tenant: acme}), not a list`}},
		{"subscription header name", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      headers:", `        "X Tenant": acme`, `        "X-Tenant:": acme`),
			nil, []string{`c.yaml:9: subscriptions.erp-orders.filter.headers.X Tenant: "X Tenant" is not a header name`,
				`c.yaml:10: subscriptions.erp-orders.filter.headers.X-Tenant:: "X-Tenant:" is not a header name`}},
		{"subscription header value", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      headers:", `        X-Tenant: "acme\r\nX-Admin: yes"`, `        X-Region: "eu\x00"`),
			nil, []string{`c.yaml:9: subscriptions.erp-orders.filter.headers.X-Tenant: has a control character in its value`,
				`c.yaml:10: subscriptions.erp-orders.filter.headers.X-Region: has a control character in its value`}},
		{"subscription header value from the environment", withRoute("  erp-orders: {types: [order.*], route: erp, filter: {headers: {X-Tenant: '${TENANT}'}}}"),
			map[string]string{"TENANT": "acme\n"}, []string{`c.yaml:4: subscriptions.erp-orders.filter.headers.X-Tenant: has a control character in its value`}},
		{"subscription header value missing", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      headers:", "        X-Tenant:"),
			nil, []string{`c.yaml:9: subscriptions.erp-orders.filter.headers.X-Tenant: required: the value the header must have ("" for an empty one)`}},
		{"subscription header value not a single value", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter: {headers: {X-Tenant: [acme, globex]}}"),
			nil, []string{`c.yaml:7: subscriptions.erp-orders.filter.headers.X-Tenant: must be a single value, not a list`}},
		{"subscription header given twice", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      headers:", "        X-Tenant: acme", "        x-tenant: globex"),
			nil, []string{`c.yaml:10: subscriptions.erp-orders.filter.headers.x-tenant: given twice (first as "X-Tenant" at line 9): header names match without regard to case`}},
		{"subscription header given twice exactly", withRoute("  erp-orders:", "    types: [order.*]", "    route: erp", "    filter:", "      headers:", "        X-Tenant: acme", "        X-Tenant: globex"),
			nil, []string{`c.yaml:10: subscriptions.erp-orders.filter.headers.X-Tenant: given twice (first at line 9)`}},

		// YAML itself and ${NAME}.
		{"syntax error", lines("listen: 127.0.0.1:1", "store: [a,"),
			nil, []string{`c.yaml:2: YAML syntax: did not find expected node content`}},
		{"syntax error on line 1", lines("a: [b,"),
			nil, []string{`c.yaml:1: YAML syntax: did not find expected node content`}},
		// The YAML library locates this one at the mapping that the stray
		// line breaks, one line early.
		{"bad indentation", lines("endpoints:", "  a: {transport: file, dir: out}", " b: {}"),
			nil, []string{`c.yaml:2: YAML syntax: did not find expected key`}},
		{"tab indentation", lines("endpoints:", "\ta: {}"),
			nil, []string{`c.yaml:2: YAML syntax: found character that cannot start any token`}},
		{"unknown anchor", lines("listen: 127.0.0.1:1", "endpoints:", "  a: *base"),
			nil, []string{`c.yaml:3: YAML syntax: unknown anchor 'base' referenced`}},
		{"not UTF-8", "listen: 127.0.0.1:1\npublic_url: \xff\n",
			nil, []string{`c.yaml:2: the file is not UTF-8 text`}},
		{"control character", "listen: 127.0.0.1:1\n\nlog: {level: \x01}\n",
			nil, []string{`c.yaml:3: control character U+0001 is not allowed in YAML`}},
		{"top level a list", lines("- listen: x"),
			nil, []string{`c.yaml:1: the configuration must be a mapping of settings (listen: ..., endpoints: ...), not a list`}},
		{"second document", lines("listen: 127.0.0.1:1", "---", "listen: 127.0.0.1:2"),
			nil, []string{`c.yaml:3: a configuration is one YAML document; this is a second one (after ---)`}},
		{"merge of a single value", lines("endpoints:", "  a: {<<: 1, transport: file, dir: out}"),
			nil, []string{`c.yaml:2: endpoints.a: << merges mappings only`}},
		{"merge of itself", lines("endpoints:", "  a: &x {<<: *x, transport: file, dir: out}"),
			nil, nil},
		{"merged unknown field", lines("endpoints:", "  a: &x {transport: file, dir: out, speed: 1}", "  b: {<<: *x}"),
			nil, []string{`c.yaml:2: endpoints.a.speed: unknown field`, `c.yaml:2: endpoints.b.speed: unknown field`}},
		{"long value clipped", lines("endpoints:", "  a: {transport: "+strings.Repeat("é", 40)+"}"),
			nil, []string{`c.yaml:2: endpoints.a.transport: must be http, smtp, file, amqp or nats, not "` + strings.Repeat("é", 32) + `…"`}},
		{"key not a name", lines("? [a, b]", ": 1"),
			nil, []string{`c.yaml:1: keys must be plain names, not a list`}},
		// Alerts.
		{"alerts notify undefined", lines("endpoints: {hook: {transport: http, url: 'https://ops.example/in'}}", "alerts:", "  notify: [hook, hoook]"),
			nil, []string{`c.yaml:3: alerts.notify[1]: endpoint "hoook" is not defined (did you mean "hook"?)`}},
		{"alerts notify not smtp or http", lines("endpoints: {out: {transport: file, dir: out}}", "alerts: {notify: [out]}"),
			nil, []string{`c.yaml:2: alerts.notify[0]: endpoint "out" is a file endpoint; notices go to smtp or http endpoints`}},
		{"alerts notify twice", lines("endpoints: {hook: {transport: http, url: 'https://ops.example/in'}}", "alerts:", "  notify:", "    - hook", "    - hook"),
			nil, []string{`c.yaml:5: alerts.notify[1]: endpoint "hook" is listed twice`}},
		{"alerts notify not a list", lines("endpoints: {hook: {transport: http, url: 'https://ops.example/in'}}", "alerts: {notify: hook}"),
			nil, []string{`c.yaml:2: alerts.notify: must be a list ([a, b] or one "- a" per line), not a single value`}},
		{"alerts oldest_due zero", lines("alerts:", "  oldest_due: 0s"),
			nil, []string{`c.yaml:2: alerts.oldest_due: must be greater than 0`}},
		{"alerts oldest_due not a duration", lines("alerts: {oldest_due: 15 minutes}"),
			nil, []string{`c.yaml:1: alerts.oldest_due: "15 minutes" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"alerts max_per_hour zero", lines("alerts:", "  max_per_hour: 0"),
			nil, []string{`c.yaml:2: alerts.max_per_hour: must be at least 1`}},
		{"alerts max_per_hour not a number", lines("alerts: {max_per_hour: many}"),
			nil, []string{`c.yaml:1: alerts.max_per_hour: "many" is not a whole number`}},
		{"alerts unknown field", lines("alerts: {notfy: [a]}"),
			nil, []string{`c.yaml:1: alerts.notfy: unknown field (did you mean "notify"?)`}},
		{"alerts with the topology in the store", lines("alerts: {notify: [hook], oldest_due: 5m, max_per_hour: 2}"),
			nil, nil},
		{"alerts good", lines("endpoints: {hook: {transport: http, url: 'https://ops.example/in'}, mail: {transport: smtp, addr: '127.0.0.1:25', from: a@b.c, to: [d@e.f]}}", "alerts: {notify: [hook, mail]}"),
			nil, nil},
		{"variable not set", lines("public_url: https://${HOST}/"),
			nil, []string{`c.yaml:1: public_url: environment variable HOST is not set`}},
		{"variable unterminated", lines("listen: 127.0.0.1:1", "public_url: https://${HOST/"),
			nil, []string{`c.yaml:2: public_url: unterminated ${ (write $$ for a literal $)`}},
		{"variable in a list", lines("outbound:", "  allow_networks:", "    - ${NET}"),
			nil, []string{`c.yaml:3: outbound.allow_networks[0]: environment variable NET is not set`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("c.yaml", []byte(tt.src), envOf(tt.env))
			if !wantErrorLines(t, err, tt.want) {
				t.Logf("source:\n%s", tt.src)
			}
			if err == nil {
				checkRoundTrip(t, c)
			}
		})
	}
}

// TestSeveralErrors checks that one load reports every problem, in file
// order, and that each can be inspected on its own.
func TestSeveralErrors(t *testing.T) {
	t.Parallel()
	src := lines(
		"lisen: 127.0.0.1:1", // 1
		"retention: 0s",      // 2
		"endpoints:",         // 3
		"  acme:",            // 4
		"    transport: http",
		"    url: ftp://acme.example/", // 6
		"    dir: out",                 // 7
		"routes:",                      // 8
		"  acme: {endpoints: [acme, nope], strategy: single}", // 9
		"policies:", // 10
		"  invoice: {priority: 12, fallback: {route: vans}}", // 11
		"log: {level: loud}", // 12
	)
	_, err := Parse("courier.yaml", []byte(src), envOf(map[string]string{"COURIER_RETENTION": "soon"}))
	want := []string{
		`courier.yaml:1: lisen: unknown field (did you mean "listen"?)`,
		`courier.yaml:2: retention: must be greater than 0`,
		`courier.yaml:6: endpoints.acme.url: must be an absolute http or https URL`,
		`courier.yaml:7: endpoints.acme.dir: not a field of http endpoints (it belongs to file endpoints)`,
		`courier.yaml:9: routes.acme.strategy: single takes one endpoint and this route has 2; use failover, round_robin or weighted`,
		`courier.yaml:9: routes.acme.endpoints[1]: endpoint "nope" is not defined`,
		`courier.yaml:11: policies.invoice.priority: must be from 0 to 9`,
		`courier.yaml:11: policies.invoice.fallback.route: route "vans" is not defined`,
		`courier.yaml:12: log.level: must be debug, info, warn or error, not "loud"`,
		`COURIER_RETENTION: "soon" is not a duration: write a Go duration such as 30s, 5m or 48h`,
	}
	wantErrorLines(t, err, want)
	if got, want := err.Error(), strings.Join(want, "\n"); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	es, ok := err.(Errors)
	if !ok || len(es) != len(want) {
		t.Fatalf("error is %T with %d problems, want Errors with %d", err, len(es), len(want))
	}
	if got := es[2]; got.File != "courier.yaml" || got.Line != 6 || got.Field != "endpoints.acme.url" || got.Message != "must be an absolute http or https URL" {
		t.Errorf("third problem = %+v", got)
	}
}

func TestOrList(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"block"}, "block"},
		{[]string{"suspend", "stop"}, "suspend or stop"},
		{[]string{"auto", "always", "never"}, "auto, always or never"},
	} {
		if got := orList(tt.words); got != tt.want {
			t.Errorf("orList(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"url", "url", 0},
		{"ulr", "url", 1}, // a swap is one edit
		{"priorty", "priority", 1},
		{"tmeout", "timeout", 1},
		{"", "abc", 3},
		{"abc", "", 3},
		{"ca", "abc", 3}, // no substring edited twice
		{"retires", "retries", 1},
		{"kitten", "sitting", 3},
	}
	for _, tc := range tests {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
