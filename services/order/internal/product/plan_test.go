package product

import (
	"reflect"
	"strings"
	"testing"
)

func item(templateID uint64, name, model string) CopyItem {
	return CopyItem{TemplateID: templateID, Product: Product{Brand: "shop", Name: name, Model: model, Price: 1}}
}

// TestChunkItemsCountsVanishedTemplates: a chunk's products come from its
// templates in the chunk's order, under the target brand; a template
// deleted since the job was accepted is counted, not invented.
func TestChunkItemsCountsVanishedTemplates(t *testing.T) {
	c := CopyChunk{TargetBrand: "shop", TemplateIDs: []uint64{3, 1, 2}}
	items, missing := c.Items(map[uint64]Template{1: {ID: 1, Brand: "src", Name: "A", Model: "1", Price: 5}, 3: {ID: 3, Brand: "src", Name: "C", Model: "3", Price: 7}})
	want := []CopyItem{
		{TemplateID: 3, Product: Product{Brand: "shop", Name: "C", Model: "3", Price: 7}},
		{TemplateID: 1, Product: Product{Brand: "shop", Name: "A", Model: "1", Price: 5}},
	}
	if !reflect.DeepEqual(items, want) || missing != 1 {
		t.Fatalf("items %+v, missing %d; want %+v and 1", items, missing, want)
	}
}

// TestPlanChunkSortsCandidatesAndKeepsRepeats: the first item of each key
// is a candidate, sorted by key so that two chunks lock keys in one order;
// a later item with the same key is a repeat, a duplicate in any database.
func TestPlanChunkSortsCandidatesAndKeepsRepeats(t *testing.T) {
	p := PlanChunk([]CopyItem{item(1, "B", "2"), item(2, "A", "1"), item(3, "B", "2"), item(4, "A", "10")})
	if got := p.Keys(); !reflect.DeepEqual(got, []Key{{"A", "1"}, {"A", "10"}, {"B", "2"}}) {
		t.Fatalf("candidate keys %v", got)
	}
	if len(p.Repeats) != 1 || p.Repeats[0].TemplateID != 3 {
		t.Fatalf("repeats %+v, want template 3", p.Repeats)
	}
}

// TestPlanResultNamesTheOwnerOfEveryDuplicate: an existing key is skipped
// and names its owner; a repeat names the product this chunk created for
// its key; the counters add up to the chunk.
func TestPlanResultNamesTheOwnerOfEveryDuplicate(t *testing.T) {
	p := PlanChunk([]CopyItem{item(1, "A", "1"), item(2, "B", "2"), item(3, "B", "2"), item(4, "C", "3")})
	existing := map[Key]uint64{{"A", "1"}: 70}
	missing := p.Missing(existing)
	if len(missing) != 2 || missing[0].Key() != (Key{"B", "2"}) || missing[1].Key() != (Key{"C", "3"}) {
		t.Fatalf("missing %+v, want B and C", missing)
	}
	missing[0].ID, missing[1].ID = 81, 82
	r := p.Result(existing, missing)
	want := []Duplicate{{TemplateID: 1, Name: "A", Model: "1", ExistingID: 70}, {TemplateID: 3, Name: "B", Model: "2", ExistingID: 81}}
	if r.Created != 2 || r.Skipped != 2 || r.Failed != 0 || !reflect.DeepEqual(r.Duplicates, want) {
		t.Fatalf("result %+v, want 2 created, 2 skipped naming %+v", r, want)
	}

	fail := p.FailAll(p.Duplicates(existing, nil))
	if fail.Created != 0 || fail.Failed != 4 || !strings.Contains(fail.Error, "2 duplicate product(s), nothing created") {
		t.Fatalf("all or nothing: %+v", fail)
	}
	fail.AddMissing(2)
	if fail.Failed != 6 || !strings.HasSuffix(fail.Error, "; 2 template(s) no longer exist") {
		t.Fatalf("after 2 vanished templates: %+v", fail)
	}
	var clean ChunkResult
	if clean.AddMissing(1); clean.Error != "1 template(s) no longer exist" {
		t.Fatalf("a clean chunk with a vanished template: %q", clean.Error)
	}
}
