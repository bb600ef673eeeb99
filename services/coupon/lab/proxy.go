package lab

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// LostAckProxy loses the acknowledgement of the deduction's COMMIT on the
// wire, with the MySQL-protocol fault proxy (pkg/faultproxy) started in
// process in front of the database.
func LostAckProxy(ctx context.Context, env lab.Env, mode coupon.Mode) (lab.Result, error) {
	return lab.Result{}, errors.New("fault proxy not available yet")
}
