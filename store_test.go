package courier_test

import (
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// TestDeliveryIsADeliveryAndNothingElse: an outcome decided by AfterAttempt
// for a success is a Delivery; a change of any field that a change writes,
// beyond what every delivery sets, makes it none, so that a store writing
// a Delivery by its few columns never drops a change. A field added to
// Message is either written by changes, and then it must be checked by
// Delivery, or it is not, and then it belongs in notWritten below.
func TestDeliveryIsADeliveryAndNothingElse(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	leased := &courier.Message{ID: "m", Type: "invoice", Route: "erp", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(leased, courier.DefaultPolicy(), false, now)
	leased.State, leased.TotalAttempts, leased.LeaseUntil, leased.LeaseOwner = courier.StateInflight, 2, now.Add(time.Minute), "node-1"
	leased.Attempts, leased.LastError, leased.LastClass, leased.Escalated = 1, "HTTP 503", courier.ClassHTTP5xx, 1
	ep := &courier.Endpoint{Name: "erp-primary"}
	next, notices := courier.AfterAttempt(leased, courier.DefaultPolicy(), ep, courier.Result{Status: 204}, now.Add(time.Second), 0)
	delivery := courier.Change{Message: next, From: courier.StateInflight, Token: leased.TotalAttempts, Prior: leased}
	if len(notices) != 0 || !delivery.Delivery() {
		t.Fatalf("a success decided by AfterAttempt is no Delivery: %+v", next)
	}
	failed, _ := courier.AfterAttempt(leased, courier.DefaultPolicy(), ep, courier.Result{Status: 503, Class: courier.ClassHTTP5xx}, now, 0)
	if (courier.Change{Message: failed, From: courier.StateInflight, Token: 2, Prior: leased}).Delivery() {
		t.Error("a failed attempt is a Delivery")
	}
	for _, c := range []courier.Change{
		{Message: next, From: courier.StateInflight, Token: 2},                // no prior
		{Message: next, From: courier.StateInflight, Token: 1, Prior: leased}, // another lease
		{Message: next, From: courier.StateQueued, Token: 2, Prior: leased},   // another state
	} {
		if c.Delivery() {
			t.Errorf("%+v is a Delivery", c)
		}
	}

	// Written by every delivery, from the message: they may differ.
	written := map[string]bool{"Attempts": true, "Endpoint": true}
	// Never written by a change: what a change carries there is ignored.
	notWritten := map[string]bool{"Type": true, "Payload": true, "Size": true, "Blob": true, "Digest": true,
		"ContentType": true, "Headers": true, "Priority": true, "DeliverAfter": true, "ExpiresAt": true, "Sender": true,
		"Hash": true, "Recipient": true, "Sequence": true, "PreviousID": true, "TraceParent": true,
		"CreatedAt": true, "Erased": true}
	typ := reflect.TypeFor[courier.Message]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		changed := *next
		alter(reflect.ValueOf(&changed).Elem().Field(i), now)
		got := courier.Change{Message: &changed, From: courier.StateInflight, Token: 2, Prior: leased}.Delivery()
		switch {
		case written[name] || notWritten[name]:
			if !got {
				t.Errorf("with another %s the change is no Delivery", name)
			}
		case got:
			t.Errorf("with another %s the change is still a Delivery: a store writing it as one would lose the %s", name, name)
		}
	}
}

// alter sets v, a field of Message, to another value.
func alter(v reflect.Value, now time.Time) {
	switch x := v.Addr().Interface().(type) {
	case *time.Time:
		if x.IsZero() {
			*x = now.Add(time.Hour)
		} else {
			*x = x.Add(time.Second)
		}
	case *map[string]string:
		*x = map[string]string{"X-Other": "1"}
	case *map[int]string:
		*x = map[int]string{1: "ok"}
	case *[]byte:
		*x = append([]byte("other"), *x...)
	case **courier.Erasure:
		*x = &courier.Erasure{At: now, By: "other"}
	default:
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "-other")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		default:
			panic("alter: a field of kind " + v.Kind().String())
		}
	}
}
