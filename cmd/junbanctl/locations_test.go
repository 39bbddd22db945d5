package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// locations set writes PostgreSQL and the workers' Redis; list reads PostgreSQL back;
// publish makes Redis exactly PostgreSQL's table again after Redis lost it. Before any
// set, the workers see the default location with its default settings.
func TestLocations(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	t.Setenv("REDIS_URL", testenv.RedisURL(t))
	t.Setenv("JUNBAN_KEY_PREFIX", prefix)
	t.Setenv("DATABASE_URL", testenv.PostgresURL(t))

	got, err := ledger.ReadLocations(ctx, rc, prefix)
	if err != nil || !reflect.DeepEqual(got, []stock.Location{stock.DefaultLocationSettings()}) {
		t.Fatalf("before any set: %+v %v", got, err)
	}
	for _, args := range [][]string{
		{"wh-east", "--rank", "2", "--lat", "40.7", "--lon", "-74.0", "--markets", "us,ca"},
		{"store-1", "--kind", "store", "--rank", "5", "--ships=false", "--pickup"},
		{"default", "--rank", "1", "--enabled=false"},
	} {
		if err := ctl(ctx, nil, "locations set", args); err != nil {
			t.Fatalf("set %v: %v", args, err)
		}
	}
	lat, lon := 40.7, -74.0
	want := []stock.Location{
		{ID: "default", Kind: stock.LocationWarehouse, Rank: 1, Ships: true},
		{ID: "wh-east", Kind: stock.LocationWarehouse, Rank: 2, Ships: true, Lat: &lat, Lon: &lon, Markets: []string{"us", "ca"}, Enabled: true},
		{ID: "store-1", Kind: stock.LocationStore, Rank: 5, Pickup: true, Enabled: true},
	}
	var out bytes.Buffer
	if err := ctl(ctx, &out, "locations list", []string{"--json"}); err != nil {
		t.Fatal(err)
	}
	var listed []stock.Location
	if err := json.Unmarshal(out.Bytes(), &listed); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !reflect.DeepEqual(listed, want) {
		t.Fatalf("listed %+v\nwant %+v", listed, want)
	}
	if got, err := ledger.ReadLocations(ctx, rc, prefix); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Redis holds %+v %v", got, err)
	}
	for _, bad := range [][]string{{"wh 2"}, {"x", "--kind", "depot"}, {"x", "--lat", "91", "--lon", "0"}, {"x", "--lat", "1"}, {"~x"}} {
		if err := ctl(ctx, nil, "locations set", bad); err == nil {
			t.Errorf("set %v: no error", bad)
		}
	}
	// Redis lost the hash, and holds a location PostgreSQL does not.
	rc.Del(ctx, ledger.LocationsKey(prefix))
	if err := ledger.PublishLocations(ctx, rc, prefix, []stock.Location{{ID: "stray", Kind: stock.LocationStore, Enabled: true}}, false); err != nil {
		t.Fatal(err)
	}
	if err := ctl(ctx, nil, "locations publish", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ledger.ReadLocations(ctx, rc, prefix); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after publish Redis holds %+v %v", got, err)
	}
}
