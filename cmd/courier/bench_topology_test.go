package main

import (
	"reflect"
	"testing"

	"github.com/courier-gw/courier/config"
)

// The objects the delivery benchmark creates through the API make the
// topology it builds in this process, so that a run with --topology store
// compares with one with --topology file like for like.
func TestBenchTopologyObjectsMatchFile(t *testing.T) {
	for _, b := range []benchDeliver{
		{endpoints: 3, concurrency: 16},
		{endpoints: 3, concurrency: 16, dead: true},
		{endpoints: 2, concurrency: 256, subs: 3},
	} {
		bt := benchTopology{b: b, rcvAddr: "127.0.0.1:9000", closedAddr: "127.0.0.1:9001"}
		var objs []*config.Object
		for _, o := range bt.objects() {
			obj, err := config.DecodeObject(o.kind, o.name, o.spec)
			if err != nil {
				t.Fatalf("%s %s: %v", o.kind, o.name, err)
			}
			objs = append(objs, obj)
		}
		got, err := config.Assemble(objs)
		if err != nil {
			t.Fatal(err)
		}
		want := bt.file()
		if !reflect.DeepEqual(got, want) {
			for name, ep := range want.Endpoints {
				if !reflect.DeepEqual(got.Endpoints[name], ep) {
					t.Errorf("%+v: endpoint %s through the API\n  %+v\nbuilt in this process\n  %+v", b, name, got.Endpoints[name], ep)
				}
			}
			for name, r := range want.Routes {
				if !reflect.DeepEqual(got.Routes[name], r) {
					t.Errorf("%+v: route %s through the API\n  %+v\nbuilt in this process\n  %+v", b, name, got.Routes[name], r)
				}
			}
			for name, s := range want.Subscriptions {
				if !reflect.DeepEqual(got.Subscriptions[name], s) {
					t.Errorf("%+v: subscription %s through the API\n  %+v\nbuilt in this process\n  %+v", b, name, got.Subscriptions[name], s)
				}
			}
			if !reflect.DeepEqual(got.Policies, want.Policies) {
				t.Errorf("%+v: policies through the API\n  %+v\nbuilt in this process\n  %+v", b, got.Policies["default"], want.Policies["default"])
			}
			if !t.Failed() {
				t.Errorf("%+v: the topologies differ (in their implicit routes)", b)
			}
		}
	}
}
