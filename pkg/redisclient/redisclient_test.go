package redisclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestClientTalksToRedis(t *testing.T) {
	_, prefix := testenv.Redis(t)
	rdb := redisclient.New(testenv.Config(t).Redis)
	defer rdb.Close()
	ctx := context.Background()
	ok, err := rdb.SetNX(ctx, prefix+"once", "1", time.Minute).Result()
	if err != nil || !ok {
		t.Fatalf("first SETNX: %v %v", ok, err)
	}
	if ok, _ := rdb.SetNX(ctx, prefix+"once", "1", time.Minute).Result(); ok {
		t.Fatal("second SETNX succeeded")
	}
}

func TestDeadRedisFailsFast(t *testing.T) {
	rdb := redisclient.New(redisclient.Config{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatal("Ping on a dead address succeeded")
	}
}
