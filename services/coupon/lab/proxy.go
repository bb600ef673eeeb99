package lab

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/variant"
)

// LostAckProxy loses the acknowledgement of the deduction's COMMIT on the
// wire: the MySQL-protocol fault proxy (pkg/lab/faultproxy) is started in process
// on a free port in front of the database, the coupon database is opened
// through it, and the proxy is armed to let the next COMMIT reach the server,
// drop the server's OK and cut the client connection. Unlike the driver
// wrapper, nothing in the client process knows: the go-sql-driver sees the
// connection die exactly as it would on a network blip.
func LostAckProxy(ctx context.Context, env lab.Env, mode variant.Mode) (lab.Result, error) {
	cfg := faultproxy.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Upstream = env.MySQL.Addr
	proxy, err := faultproxy.New(cfg, env.Log, prometheus.NewRegistry())
	if err != nil {
		return lab.Result{}, err
	}
	addr, err := proxy.Listen()
	if err != nil {
		return lab.Result{}, err
	}
	defer proxy.Close()
	env.MySQL.Addr = addr.String()
	env.Note("fault proxy on %s in front of %s", addr, cfg.Upstream)

	f, err := Setup(ctx, env, "i1_proxy_"+string(mode), mode)
	if err != nil {
		return lab.Result{}, err
	}
	defer f.Close()

	env.Note("arming the proxy: the next COMMIT reaches the server, its reply is dropped")
	n, err := loseOneAckThenRetry(ctx, env, f, lostAck{
		arm:    func() { proxy.Arm(1) },
		disarm: proxy.Disarm,
		lost:   func() int64 { return int64(proxy.Stats().AcksDropped) },
		what:   "dropped COMMIT ack, the proxy dropped",
	})
	if err != nil {
		return lab.Result{}, err
	}
	return result(mode, "proxy", "1 lost COMMIT ACK (MySQL proxy), then the scheduled retry", n), nil
}
