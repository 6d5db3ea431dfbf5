package metrics_test

import (
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/metrics"
)

func TestStartStopStress(t *testing.T) {
	m := metrics.New(metrics.Options{Source: sqlitetest.Open(t), TopologyFunc: topology, Interval: time.Millisecond})
	startstoptest.Stress(t, m)
}
