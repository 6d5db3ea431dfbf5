package sqlite_test

import (
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return sqlitetest.Open(t) })
}
