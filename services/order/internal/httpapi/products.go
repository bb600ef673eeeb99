package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// productJSON is a product on the wire.
type productJSON struct {
	ID        uint64    `json:"id"`
	Brand     string    `json:"brand"`
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Price     int64     `json:"price"`
	Available int       `json:"available"`
	CreatedAt time.Time `json:"created_at"`
}

func toProductJSON(p product.Product) productJSON {
	return productJSON{ID: p.ID, Brand: p.Brand, Name: p.Name, Model: p.Model, Price: p.Price, Available: p.Available, CreatedAt: p.CreatedAt}
}

// productInput is the body of POST /admin/products, and one template.
type productInput struct {
	Brand string `json:"brand"`
	Name  string `json:"name"`
	Model string `json:"model"`
	Price *int64 `json:"price"`
}

func (in productInput) toApp() (app.CreateProduct, error) {
	if in.Price == nil {
		return app.CreateProduct{}, product.Invalidf("price is required")
	}
	return app.CreateProduct{Brand: in.Brand, Name: in.Name, Model: in.Model, Price: *in.Price}, nil
}

func (h *API) createProduct(c *gin.Context) {
	var in productInput
	if !httpserver.DecodeJSON(c, &in) {
		return
	}
	cmd, err := in.toApp()
	if err != nil {
		h.fail(c, err)
		return
	}
	p, err := h.app.CreateProduct(c.Request.Context(), cmd)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Location", fmt.Sprintf("/products/%d", p.ID))
	c.JSON(http.StatusCreated, toProductJSON(p))
}

// StockJSON is the answer of PUT /admin/products/:id/stock.
type StockJSON struct {
	ProductID uint64 `json:"product_id"`
	Available int    `json:"available"`
}

// setStock serves PUT /admin/products/:id/stock: {"available":n} sets the
// units that can be ordered.
func (h *API) setStock(c *gin.Context) {
	id, ok := h.productID(c)
	if !ok {
		return
	}
	var in struct {
		Available *int `json:"available"`
	}
	if !httpserver.DecodeJSON(c, &in) {
		return
	}
	if in.Available == nil {
		h.fail(c, product.Invalidf("available is required"))
		return
	}
	s, err := h.app.SetStock(c.Request.Context(), id, *in.Available)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, StockJSON{ProductID: s.ProductID, Available: s.Available})
}

func (h *API) getProduct(c *gin.Context) {
	id, ok := h.productID(c)
	if !ok {
		return
	}
	p, err := h.app.Product(c.Request.Context(), id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toProductJSON(p))
}

// listProducts pages through a brand's live products by id:
// ?brand=&after=&limit=.
func (h *API) listProducts(c *gin.Context) {
	after, err := optionalUint(c.Query("after"))
	if err != nil {
		h.fail(c, product.Invalidf("after must be a product id"))
		return
	}
	limit, err := optionalUint(c.Query("limit"))
	if err != nil {
		h.fail(c, product.Invalidf("limit must be a positive number"))
		return
	}
	ps, err := h.app.ProductsByBrand(c.Request.Context(), c.Query("brand"), after, int(min(limit, 1<<20)))
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]productJSON, len(ps))
	for i, p := range ps {
		out[i] = toProductJSON(p)
	}
	c.JSON(http.StatusOK, gin.H{"products": out})
}

func optionalUint(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

func (h *API) deleteProduct(c *gin.Context) {
	id, ok := h.productID(c)
	if !ok {
		return
	}
	if err := h.app.DeleteProduct(c.Request.Context(), id); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *API) createTemplates(c *gin.Context) {
	var in struct {
		Templates []productInput `json:"templates"`
	}
	if !httpserver.DecodeJSON(c, &in) {
		return
	}
	cmds := make([]app.CreateProduct, len(in.Templates))
	for i, t := range in.Templates {
		var err error
		if cmds[i], err = t.toApp(); err != nil {
			h.fail(c, fmt.Errorf("template %d: %w", i, err))
			return
		}
	}
	ts, err := h.app.CreateTemplates(c.Request.Context(), cmds)
	if err != nil {
		h.fail(c, err)
		return
	}
	ids := make([]uint64, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	c.JSON(http.StatusCreated, gin.H{"template_ids": ids})
}

// copyRequestJSON is the body of POST /admin/products/batch-copy.
type copyRequestJSON struct {
	RequestID   string   `json:"request_id"`
	SourceBrand string   `json:"source_brand"`
	TemplateIDs []uint64 `json:"template_ids"`
	TargetBrand string   `json:"target_brand"`
	OnDuplicate string   `json:"on_duplicate"` // "skip" (default) or "fail"
}

func (h *API) startCopy(c *gin.Context) {
	var in copyRequestJSON
	if !httpserver.DecodeJSON(c, &in) {
		return
	}
	job, existed, err := h.app.StartCopy(c.Request.Context(), product.CopyRequest{
		RequestID: in.RequestID, SourceBrand: in.SourceBrand, TemplateIDs: in.TemplateIDs,
		TargetBrand: in.TargetBrand, OnDuplicate: product.OnDuplicate(in.OnDuplicate),
	})
	if err != nil {
		h.fail(c, err)
		return
	}
	url := "/admin/products/batch-copy/" + job.ID
	c.Header("Location", url)
	c.JSON(http.StatusAccepted, gin.H{"job_id": job.ID, "request_id": job.RequestID, "total": job.Total, "chunks": job.Chunks, "existed": existed, "status_url": url})
}

// CopyProgressJSON is the answer of GET /admin/products/batch-copy/:job.
type CopyProgressJSON struct {
	JobID       string              `json:"job_id"`
	RequestID   string              `json:"request_id"`
	TargetBrand string              `json:"target_brand"`
	OnDuplicate string              `json:"on_duplicate"`
	Status      string              `json:"status"`
	Done        bool                `json:"done"`
	Total       int                 `json:"total"`
	Created     int                 `json:"created"`
	Skipped     int                 `json:"skipped"`
	Failed      int                 `json:"failed"`
	Chunks      int                 `json:"chunks"`
	ChunksDone  int                 `json:"chunks_done"`
	Errors      []string            `json:"errors,omitempty"`
	Duplicates  []product.Duplicate `json:"duplicates,omitempty"`
}

func (h *API) copyProgress(c *gin.Context) {
	p, err := h.app.CopyProgress(c.Request.Context(), c.Param("job"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, CopyProgressJSON{
		JobID: p.Job.ID, RequestID: p.Job.RequestID, TargetBrand: p.Job.TargetBrand, OnDuplicate: string(p.Job.OnDuplicate),
		Status: p.Status(), Done: p.Done(), Total: p.Job.Total, Created: p.Created, Skipped: p.Skipped, Failed: p.Failed,
		Chunks: p.Job.Chunks, ChunksDone: p.ChunksDone, Errors: p.Errors, Duplicates: p.Duplicates,
	})
}

func (h *API) productID(c *gin.Context) (uint64, bool) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		problem.Abort(c, http.StatusNotFound, "no such product")
		return 0, false
	}
	return id, true
}
