package platform

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/redislock"
)

// Scheduler exposes the job scheduler to the tests.
type Scheduler struct{ s *scheduler }

func NewScheduler(locks *redislock.Client, lockTTL time.Duration, log *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Scheduler, error) {
	s, err := newScheduler(locks, lockTTL, log, reg, tp)
	return &Scheduler{s}, err
}

func (s *Scheduler) Add(j Job) error                           { return s.s.add(j) }
func (s *Scheduler) RunOnce(ctx context.Context, j Job) string { return s.s.runOnce(ctx, j) }
func (s *Scheduler) Start()                                    { s.s.start() }
func (s *Scheduler) Stop(ctx context.Context) error            { return s.s.stop(ctx) }
