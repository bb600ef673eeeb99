package product

import (
	"errors"
	"strings"
	"testing"
)

func TestNewProductValidates(t *testing.T) {
	p, err := NewProduct(" acme ", " Phone ", " X1 ", 100)
	if err != nil || p.Brand != "acme" || p.Name != "Phone" || p.Model != "X1" {
		t.Fatalf("trimmed product: %+v %v", p, err)
	}
	for _, c := range []struct {
		brand, name, model string
		price              int64
		want               string
	}{
		{"", "n", "m", 1, "brand is required"},
		{"b", " ", "m", 1, "name is required"},
		{"b", "n", "", 1, "model is required"},
		{"b", "n", "m", -1, "price must not be negative"},
		{"b", strings.Repeat("é", MaxNameLen+1), "m", 1, "name is longer"},
		{strings.Repeat("b", MaxBrandLen+1), "n", "m", 1, "brand is longer"},
	} {
		_, err := NewProduct(c.brand, c.name, c.model, c.price)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewProduct(%q, %q, %q, %d) = %v, want ErrInvalid with %q", c.brand, c.name, c.model, c.price, err, c.want)
		}
	}
	if _, err := NewProduct("b", strings.Repeat("é", MaxNameLen), "m", 0); err != nil {
		t.Errorf("a name of exactly %d characters is refused: %v", MaxNameLen, err)
	}
}

func TestParseOnDuplicate(t *testing.T) {
	if d, err := ParseOnDuplicate(""); err != nil || d != SkipDuplicates {
		t.Errorf("default on_duplicate = %q, %v; want skip", d, err)
	}
	if d, err := ParseOnDuplicate("fail"); err != nil || d != FailOnDuplicate {
		t.Errorf("on_duplicate fail = %q, %v", d, err)
	}
	if _, err := ParseOnDuplicate("ignore"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown on_duplicate: %v", err)
	}
}

func TestSplitChunks(t *testing.T) {
	job := CopyJob{ID: "j", TargetBrand: "shop", OnDuplicate: FailOnDuplicate}
	ids := make([]uint64, 250)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	chunks := SplitChunks(job, ids, 100)
	if len(chunks) != 3 || len(chunks[2].TemplateIDs) != 50 || chunks[2].Seq != 2 || chunks[1].TemplateIDs[0] != 101 {
		t.Fatalf("chunks: %d, last %+v", len(chunks), chunks[len(chunks)-1])
	}
	seen := map[string]bool{}
	for _, c := range chunks {
		if seen[c.MessageID()] || len(c.MessageID()) > 64 {
			t.Fatalf("message id %q repeated or too long", c.MessageID())
		}
		seen[c.MessageID()] = true
	}
}

func TestCopyRequestValidate(t *testing.T) {
	ok := CopyRequest{RequestID: "r", SourceBrand: "b", TargetBrand: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]CopyRequest{
		"no request id":   {SourceBrand: "b", TargetBrand: "t"},
		"no selection":    {RequestID: "r", TargetBrand: "t"},
		"both selections": {RequestID: "r", SourceBrand: "b", TemplateIDs: []uint64{1}, TargetBrand: "t"},
		"no target":       {RequestID: "r", SourceBrand: "b"},
		"zero id":         {RequestID: "r", TemplateIDs: []uint64{0}, TargetBrand: "t"},
		"bad policy":      {RequestID: "r", SourceBrand: "b", TargetBrand: "t", OnDuplicate: "x"},
	} {
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestDuplicatesErrorNamesEveryDuplicate(t *testing.T) {
	msg := DuplicatesError([]Duplicate{{Name: "A", Model: "1", ExistingID: 7}, {Name: "B", Model: "2", ExistingID: 9}, {Name: "C", Model: "3"}})
	for _, want := range []string{"3 duplicate", `("A", "1") exists as product 7`, `("B", "2") exists as product 9`, `("C", "3") appears more than once`} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not contain %q", msg, want)
		}
	}
}
