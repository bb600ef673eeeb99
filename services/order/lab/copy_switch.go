package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// The console's switch for incident 3 (services/web's lab): POST
// /admin/lab/product-copy seeds templates of a brand of its own and sends
// their batch copy several times within milliseconds, as the upstream bug
// did, through the service's own batch-copy path (its job, outbox, stream
// and consumer pool); the chunks of that brand are created by the variant
// the learner picked, at most workers at a time. GET
// /admin/lab/product-copy/{run} reads what the run wrote. Both exist in lab
// mode only (Plug).

// Bounds of one run from the console.
const (
	maxRunCopies   = 5
	maxRunProducts = 500
	keptRuns       = 20
)

// copySwitch is the lab service's ProductCreator: a chunk of a run's target
// brand goes to the run's variant, behind its slots; everything else to
// fallback, the creator PRODUCT_COPY_MODE chose.
type copySwitch struct {
	fallback app.ProductCreator
	pool     int      // the consumer's workers: a run cannot have more
	db       *gorm.DB // set by routes, before any run

	mu   sync.Mutex
	runs map[string]*copyRun // by target brand
	ids  []string            // target brands, oldest first
}

// copyRun is one run of the switch.
type copyRun struct {
	ID       string       `json:"run"`
	Variant  variant.Mode `json:"variant"`
	Workers  int          `json:"workers"`
	Copies   int          `json:"copies"`
	Products int          `json:"products"`
	Brand    string       `json:"target_brand"`
	Jobs     []string     `json:"jobs"`
	Started  time.Time    `json:"started_at"`

	creator app.ProductCreator
	slots   chan struct{}
	meet    *meeting
}

// meeting is where the copies of a run's chunks meet: a gate per chunk's
// keys.
type meeting struct {
	mu    sync.Mutex
	gates map[string]*gate
}

// gate is where the copies of one chunk meet.
type gate struct {
	arrived int
	open    chan struct{}
}

// gatherWait bounds how long a chunk waits for the other copies of its
// products.
const gatherWait = 3 * time.Second

// gather holds a chunk until the run's every copy of the same products has
// reached a worker, or gatherWait has passed: the copies then start within
// milliseconds, as the upstream bug sent them, however the outbox relay
// happened to batch their messages.
func (m *meeting) gather(ctx context.Context, key string, copies int) {
	m.mu.Lock()
	g, ok := m.gates[key]
	if !ok {
		g = &gate{open: make(chan struct{})}
		m.gates[key] = g
	}
	g.arrived++
	if g.arrived == copies {
		close(g.open)
		delete(m.gates, key)
	}
	m.mu.Unlock()
	t := time.NewTimer(gatherWait)
	defer t.Stop()
	select {
	case <-g.open:
	case <-t.C:
	case <-ctx.Done():
	}
}

func newCopySwitch(fallback app.ProductCreator, pool int) *copySwitch {
	if fallback == nil {
		fallback = app.KeyedProducts{}
	}
	return &copySwitch{fallback: fallback, pool: pool, runs: map[string]*copyRun{}}
}

// Create is a single POST /admin/products: never a run's.
func (s *copySwitch) Create(ctx context.Context, products product.Store, p product.Product) (product.Product, error) {
	return s.fallback.Create(ctx, products, p)
}

// CopyChunk creates plan with its run's variant, waiting for one of the
// run's slots, or with fallback when plan is no run's.
func (s *copySwitch) CopyChunk(ctx context.Context, tx product.Tx, plan product.ChunkPlan, onDup product.OnDuplicate) (product.ChunkResult, error) {
	var run *copyRun
	if len(plan.Candidates) > 0 {
		s.mu.Lock()
		run = s.runs[plan.Candidates[0].Product.Brand]
		s.mu.Unlock()
	}
	if run == nil {
		return s.fallback.CopyChunk(ctx, tx, plan, onDup)
	}
	run.meet.gather(ctx, fmt.Sprint(plan.Keys()), run.Copies)
	select {
	case run.slots <- struct{}{}:
	case <-ctx.Done():
		return product.ChunkResult{}, ctx.Err()
	}
	// A worker is done with a chunk once its transaction has committed,
	// after this returns: the slot is given back when what the chunk
	// created can be seen from outside it (or it surely rolled back).
	before, err := s.committed(ctx, run.Brand, plan)
	if err != nil {
		<-run.slots
		return product.ChunkResult{}, err
	}
	res, err := run.creator.CopyChunk(ctx, tx, plan, onDup)
	if err != nil || res.Created == 0 {
		<-run.slots
		return res, err
	}
	go func() {
		defer func() { <-run.slots }()
		for deadline := time.Now().Add(commitWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if n, err := s.committed(context.Background(), run.Brand, plan); err == nil && n >= before+int64(res.Created) {
				return
			}
		}
	}()
	return res, nil
}

// commitWait bounds how long a chunk's slot waits for its commit.
const commitWait = 5 * time.Second

// committed counts the committed live products of brand with plan's keys,
// read outside any chunk's transaction.
func (s *copySwitch) committed(ctx context.Context, brand string, plan product.ChunkPlan) (int64, error) {
	names := make([]string, len(plan.Candidates))
	for i, it := range plan.Candidates {
		names[i] = it.Product.Name
	}
	var n int64
	err := s.db.WithContext(ctx).Table("products").Where("deleted = 0 AND brand = ? AND name IN ?", brand, names).Count(&n).Error
	return n, err
}

// add registers run, forgetting the oldest beyond keptRuns.
func (s *copySwitch) add(run *copyRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[run.Brand] = run
	s.ids = append(s.ids, run.Brand)
	for len(s.ids) > keptRuns {
		delete(s.runs, s.ids[0])
		s.ids = s.ids[1:]
	}
}

func (s *copySwitch) byID(id string) *copyRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[runBrand(id)]
}

func runBrand(id string) string { return "lab3-" + id }

// copyRunRequest is the body of POST /admin/lab/product-copy.
type copyRunRequest struct {
	Variant  variant.Mode `json:"variant"`
	Workers  int          `json:"workers"`
	Copies   int          `json:"copies"`
	Products int          `json:"products"`
}

// copyRunView is a run and what it wrote so far.
type copyRunView struct {
	copyRun
	Chunks     int `json:"chunks"`
	ChunksDone int `json:"chunks_done"`
	Created    int `json:"created"`
	Skipped    int `json:"skipped"`
	Failed     int `json:"failed"`
	// Live is the live products of the run's brand; Duplicates those
	// beyond one per (name, model).
	Live       int64 `json:"live"`
	Duplicates int64 `json:"duplicates"`
}

// routes mounts the switch's two routes behind admin.
func (s *copySwitch) routes(w *platform.Wiring, admin gin.HandlerFunc, p *assembly.Parts) {
	s.db = w.DB
	w.Routes(func(r gin.IRouter) {
		g := r.Group("/admin/lab/product-copy", admin)
		g.POST("", func(c *gin.Context) { s.start(c, p) })
		g.GET("/:run", func(c *gin.Context) { s.view(c, p) })
	})
}

func (s *copySwitch) start(c *gin.Context, p *assembly.Parts) {
	var in copyRunRequest
	if err := c.ShouldBindJSON(&in); err != nil {
		problem.Abort(c, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	var creator app.ProductCreator
	switch in.Variant {
	case variant.Fixed:
		creator = app.KeyedProducts{}
	case variant.Broken:
		creator = CheckThenInsert{}
	default:
		problem.Abort(c, http.StatusBadRequest, `variant must be "fixed" or "broken"`)
		return
	}
	if in.Workers < 1 || in.Workers > s.pool || in.Copies < 1 || in.Copies > maxRunCopies || in.Products < 1 || in.Products > maxRunProducts {
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("give 1 to %d workers (the consumer's PRODUCT_COPY_WORKERS), 1 to %d copies, 1 to %d products",
			s.pool, maxRunCopies, maxRunProducts))
		return
	}
	ctx := c.Request.Context()
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	run := &copyRun{ID: id, Variant: in.Variant, Workers: in.Workers, Copies: in.Copies, Products: in.Products,
		Brand: runBrand(id), Started: time.Now(), creator: creator, slots: make(chan struct{}, in.Workers), meet: &meeting{gates: map[string]*gate{}}}
	// Product keys are global, so the templates' names are the run's own.
	ts := make([]app.CreateProduct, in.Products)
	for i := range ts {
		ts[i] = app.CreateProduct{Brand: run.Brand + "-templates", Name: fmt.Sprintf("lab3 %s item %03d", id, i), Model: "M-" + strconv.Itoa(i), Price: int64(100 + i)}
	}
	if _, err := p.App.CreateTemplates(ctx, ts); err != nil {
		problem.Abort(c, http.StatusInternalServerError, "seed templates: "+err.Error())
		return
	}
	s.add(run) // before the first chunk can be consumed
	for i := range in.Copies {
		job, _, err := p.App.StartCopy(ctx, product.CopyRequest{RequestID: fmt.Sprintf("%s-copy-%d", run.Brand, i+1),
			SourceBrand: run.Brand + "-templates", TargetBrand: run.Brand, OnDuplicate: product.SkipDuplicates})
		if err != nil {
			problem.Abort(c, http.StatusInternalServerError, "start copy: "+err.Error())
			return
		}
		s.mu.Lock()
		run.Jobs = append(run.Jobs, job.ID)
		s.mu.Unlock()
	}
	c.Header("Location", "/admin/lab/product-copy/"+id)
	c.JSON(http.StatusAccepted, run)
}

func (s *copySwitch) view(c *gin.Context, p *assembly.Parts) {
	run := s.byID(c.Param("run"))
	if run == nil {
		problem.Abort(c, http.StatusNotFound, "no such run (the service keeps its last "+strconv.Itoa(keptRuns)+")")
		return
	}
	ctx := c.Request.Context()
	s.mu.Lock()
	v := copyRunView{copyRun: *run}
	v.Jobs = append([]string(nil), run.Jobs...)
	s.mu.Unlock()
	for _, id := range v.Jobs {
		pr, err := p.App.CopyProgress(ctx, id)
		if err != nil && !errors.Is(err, product.ErrNotFound) {
			problem.Abort(c, http.StatusInternalServerError, err.Error())
			return
		}
		v.Chunks += pr.Job.Chunks
		v.ChunksDone += pr.ChunksDone
		v.Created += pr.Created
		v.Skipped += pr.Skipped
		v.Failed += pr.Failed
	}
	err := s.db.WithContext(ctx).Raw(`SELECT COUNT(*), COALESCE(COUNT(*) - COUNT(DISTINCT name, model), 0) FROM products
		WHERE deleted = 0 AND brand = ?`, run.Brand).Row().Scan(&v.Live, &v.Duplicates)
	if err != nil {
		problem.Abort(c, http.StatusInternalServerError, "count products: "+err.Error())
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, v)
}
