package product

import (
	"fmt"
	"slices"
	"strings"
)

// CopyItem is one template of a chunk and the product it should become.
type CopyItem struct {
	TemplateID uint64
	Product    Product
}

// Items returns the products c asks for, in c's order, from templates (the
// chunk's templates by id), and how many of c's templates no longer exist.
func (c CopyChunk) Items(templates map[uint64]Template) (items []CopyItem, missing int) {
	items = make([]CopyItem, 0, len(c.TemplateIDs))
	for _, id := range c.TemplateIDs {
		t, ok := templates[id]
		if !ok {
			missing++
			continue
		}
		items = append(items, CopyItem{TemplateID: id, Product: Product{Brand: c.TargetBrand, Name: t.Name, Model: t.Model, Price: t.Price}})
	}
	return items, missing
}

// ChunkPlan is what a chunk will create: the first item of every key
// (Candidates, sorted by key) and the later items that repeat a key within
// the chunk (Repeats), which are duplicates whatever the database holds.
type ChunkPlan struct {
	Candidates []CopyItem
	Repeats    []CopyItem
}

// PlanChunk splits items into candidates and repeats. The candidates are
// sorted by key: two chunks that insert the same keys in one global order
// lock them in that order and cannot deadlock on each other.
func PlanChunk(items []CopyItem) ChunkPlan {
	var p ChunkPlan
	seen := make(map[Key]bool, len(items))
	for _, it := range items {
		if seen[it.Product.Key()] {
			p.Repeats = append(p.Repeats, it)
			continue
		}
		seen[it.Product.Key()] = true
		p.Candidates = append(p.Candidates, it)
	}
	slices.SortFunc(p.Candidates, func(a, b CopyItem) int {
		return strings.Compare(a.Product.Name+"\x00"+a.Product.Model, b.Product.Name+"\x00"+b.Product.Model)
	})
	return p
}

// Keys returns the candidates' keys, in the plan's order.
func (p ChunkPlan) Keys() []Key {
	keys := make([]Key, len(p.Candidates))
	for i, it := range p.Candidates {
		keys[i] = it.Product.Key()
	}
	return keys
}

// Missing returns the products of the candidates whose key has no owner in
// existing: the products to create, in the plan's order.
func (p ChunkPlan) Missing(existing map[Key]uint64) []Product {
	out := make([]Product, 0, len(p.Candidates))
	for _, it := range p.Candidates {
		if _, ok := existing[it.Product.Key()]; !ok {
			out = append(out, it.Product)
		}
	}
	return out
}

// Duplicates lists the candidates whose key is in existing, and the
// repeats, each naming the product that holds its key: the existing one, or
// the one this chunk created (created, by key; nil before anything is).
func (p ChunkPlan) Duplicates(existing, created map[Key]uint64) []Duplicate {
	var dups []Duplicate
	for _, it := range p.Candidates {
		if id, ok := existing[it.Product.Key()]; ok {
			dups = append(dups, duplicate(it, id))
		}
	}
	for _, it := range p.Repeats {
		id, ok := existing[it.Product.Key()]
		if !ok {
			id = created[it.Product.Key()]
		}
		dups = append(dups, duplicate(it, id))
	}
	return dups
}

func duplicate(it CopyItem, existingID uint64) Duplicate {
	return Duplicate{TemplateID: it.TemplateID, Name: it.Product.Name, Model: it.Product.Model, ExistingID: existingID}
}

// Result is the outcome of a chunk that inserted created (the products it
// created, with their ids) over existing (the keys' owners it found first).
func (p ChunkPlan) Result(existing map[Key]uint64, created []Product) ChunkResult {
	byKey := make(map[Key]uint64, len(created))
	for _, c := range created {
		byKey[c.Key()] = c.ID
	}
	dups := p.Duplicates(existing, byKey)
	return ChunkResult{Created: len(created), Skipped: len(dups), Duplicates: dups}
}

// FailAll is the all-or-nothing answer to a chunk that met dups: nothing is
// created, every item fails, and the error names every duplicate.
func (p ChunkPlan) FailAll(dups []Duplicate) ChunkResult {
	return ChunkResult{Failed: len(p.Candidates) + len(p.Repeats), Error: DuplicatesError(dups), Duplicates: dups}
}

// AddMissing counts the chunk's templates that no longer existed as failed,
// and says so in the result's error.
func (r *ChunkResult) AddMissing(missing int) {
	if missing == 0 {
		return
	}
	r.Failed += missing
	r.Error = strings.TrimPrefix(r.Error+fmt.Sprintf("; %d template(s) no longer exist", missing), "; ")
}
