package testenv_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

func TestServicesAnswer(t *testing.T) {
	t.Parallel()
	rc, prefix := testenv.Redis(t)
	if err := rc.Set(context.Background(), prefix+":k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	db := testenv.Postgres(t)
	var n int64
	if err := db.Raw("SELECT count(*) FROM skus").Scan(&n).Error; err != nil {
		t.Fatalf("migrated schema has no skus table: %v", err)
	}
	q := testenv.NewQueues(t, testenv.SQS(t), 30)
	if q.Orders.URL == "" || q.Orders.DLQURL == "" {
		t.Fatalf("queues not created: %+v", q)
	}
}
