package courier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ClaimCheck is an endpoint's claim check: a payload larger than Above is
// not sent; the receiver gets a notice with a signed URL, valid for TTL,
// from which it fetches the payload from courier's API. The attempt is
// delivered when the receiver takes the notice.
type ClaimCheck struct {
	Above int64         // payloads of more bytes than this are claimed
	TTL   time.Duration // how long the URL of a notice stays valid
}

// The defaults of a claim_check block that leaves fields out.
const (
	DefaultClaimCheckAbove = 10 << 20
	DefaultClaimCheckTTL   = 24 * time.Hour
)

// ClaimSecretName names the store's secret (Store.Secret) that signs
// claim-check URLs: every node signs and verifies with the same one.
const ClaimSecretName = "claim-check"

// ClaimNoticeType is the content type of a claim-check notice, so that a
// receiver (and any transport) can tell a notice from a payload.
const ClaimNoticeType = "application/vnd.courier.claim-check+json"

// Applies reports whether m goes to the endpoint as a notice.
func (c *ClaimCheck) Applies(m *Message) bool {
	return c != nil && int64(m.PayloadSize()) > c.Above
}

// PayloadSHA256 is the hex SHA-256 of m's payload: its Digest for a blob,
// else computed from Payload.
func (m *Message) PayloadSHA256() string {
	if m.Blob != "" {
		return m.Digest
	}
	return PayloadDigest(m.Payload)
}

// ClaimTicket is what a claim-check URL grants: the payload of one message
// (or delivery, by Key), with one digest, to the receiver of one endpoint,
// until Expires (whole seconds).
type ClaimTicket struct {
	Key      string
	Endpoint string
	Digest   string // hex SHA-256 of the payload
	Expires  time.Time
}

// The query parameters of a claim-check URL.
const (
	ClaimParamEndpoint = "endpoint"
	ClaimParamExpires  = "expires"
	ClaimParamDigest   = "sha256"
	ClaimParamSig      = "sig"
)

// ClaimToken returns the signature of c under secret: base64url (without
// padding) of HMAC-SHA256 over the claim's fields, each prefixed with its
// length so that no two claims sign the same bytes.
func ClaimToken(secret []byte, c ClaimTicket) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("courier-claim-v1"))
	for _, f := range []string{c.Key, c.Endpoint, c.Digest, strconv.FormatInt(c.Expires.Unix(), 10)} {
		mac.Write([]byte("\n" + strconv.Itoa(len(f)) + ":" + f))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// ClaimPath is the API path of a message's claim: /v1/claims/{id}, or
// /v1/claims/{id}/{subscription} for a delivery of a published message.
// Ids and names hold only characters a path carries as they are, but for
// the '/' of a tenant's subscription (acme/crm), which is escaped so that
// the subscription stays one segment.
func ClaimPath(key string) string {
	id, sub := ParseKey(key)
	if sub == "" {
		return "/v1/claims/" + id
	}
	return "/v1/claims/" + id + "/" + url.PathEscape(sub)
}

// ClaimURL returns the signed URL of c under publicURL, courier's address
// as its receivers reach it.
func ClaimURL(publicURL string, secret []byte, c ClaimTicket) string {
	q := strings.Join([]string{
		ClaimParamEndpoint + "=" + c.Endpoint,
		ClaimParamExpires + "=" + strconv.FormatInt(c.Expires.Unix(), 10),
		ClaimParamDigest + "=" + c.Digest,
		ClaimParamSig + "=" + ClaimToken(secret, c),
	}, "&")
	return strings.TrimRight(publicURL, "/") + ClaimPath(c.Key) + "?" + q
}

// ParseClaim reads the claim of a URL from its key (from the path) and its
// query parameters; get returns a parameter's value. A URL that lacks one
// is an error with CodePermissionDenied: it grants nothing.
func ParseClaim(key string, get func(string) string) (ClaimTicket, string, error) {
	c := ClaimTicket{Key: key, Endpoint: get(ClaimParamEndpoint), Digest: get(ClaimParamDigest)}
	sig := get(ClaimParamSig)
	exp, err := strconv.ParseInt(get(ClaimParamExpires), 10, 64)
	if err != nil || c.Endpoint == "" || c.Digest == "" || sig == "" {
		return ClaimTicket{}, "", Errorf(CodePermissionDenied, "this is not a claim-check URL courier made: it needs %s, %s, %s and %s",
			ClaimParamEndpoint, ClaimParamExpires, ClaimParamDigest, ClaimParamSig)
	}
	c.Expires = time.Unix(exp, 0).UTC()
	return c, sig, nil
}

// VerifyClaim checks that sig is c's signature under secret (in constant
// time) and that c has not expired at now. Either failure is an error with
// CodePermissionDenied: the URL was changed or not made by courier, or it
// is too late to use it.
func VerifyClaim(secret []byte, c ClaimTicket, sig string, now time.Time) error {
	want := ClaimToken(secret, c)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return Errorf(CodePermissionDenied, "the signature of this claim-check URL does not match: it was changed, or not made by this courier")
	}
	if !now.Before(c.Expires) {
		return Errorf(CodePermissionDenied, "this claim-check URL expired at %s", c.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// ClaimNotice is what a receiver gets instead of a claimed payload.
type ClaimNotice struct {
	ClaimCheck ClaimNoticeBody `json:"claim_check"`
}

// ClaimNoticeBody says where to fetch the payload, until when, and what it
// is, so that the receiver can check what it fetched.
type ClaimNoticeBody struct {
	URL         string    `json:"url"`
	ExpiresAt   time.Time `json:"expires_at"`
	MessageID   string    `json:"message_id"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	SHA256      string    `json:"sha256"`
}

// ClaimNoticeFor returns the message sent in m's place: m with the notice
// of the claim at url as its payload, of type ClaimNoticeType. m is not
// changed.
func ClaimNoticeFor(m *Message, url string, expires time.Time) *Message {
	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	n := ClaimNotice{ClaimCheck: ClaimNoticeBody{
		URL: url, ExpiresAt: expires.UTC(), MessageID: m.ID, Size: int64(m.PayloadSize()),
		ContentType: ct, SHA256: m.PayloadSHA256(),
	}}
	body, err := json.Marshal(n)
	if err != nil {
		panic("courier: a claim notice does not encode: " + err.Error()) // only strings, numbers and a time
	}
	c := *m
	c.Payload, c.Size, c.Blob, c.Digest = body, len(body), "", ""
	c.ContentType = ClaimNoticeType
	return &c
}
