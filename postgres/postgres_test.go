package postgres_test

import (
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return pgtest.Open(t) })
}

func TestSharedLimits(t *testing.T) {
	storetest.RunLimits(t, func(t *testing.T) courier.SharedLimits { return pgtest.Open(t) })
}
