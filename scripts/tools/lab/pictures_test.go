package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// TestPictureEntriesPairBrokenWithFixed: an incident's picture shows its
// broken variant beside the fixed one of the same story, whatever comes
// between them, and the first two variants when there is no such pair.
func TestPictureEntriesPairBrokenWithFixed(t *testing.T) {
	of := func(variants ...string) []entry {
		var out []entry
		for _, v := range variants {
			out = append(out, entry{Row: lab.Row{Incident: 1, Variant: v}})
		}
		return out
	}
	for _, c := range []struct {
		variants []string
		want     string
	}{
		{[]string{"broken/driver", "broken/proxy", "fixed/driver", "fixed/proxy"}, "broken/driver fixed/driver"},
		{[]string{"broken/late", "fixed/crash", "fixed/late"}, "broken/late fixed/late"},
		{[]string{"broken", "orderly", "fixed", "fixed-all-or-nothing"}, "broken fixed"},
		{[]string{"broken-check-then-set", "broken", "fixed-set-nx", "fixed"}, "broken fixed"},
		{[]string{"alone"}, "alone"},
		{[]string{"a", "b", "c"}, "a b"},
	} {
		var got string
		for i, e := range pictureEntries(of(c.variants...)) {
			if i > 0 {
				got += " "
			}
			got += e.Row.Variant
		}
		if got != c.want {
			t.Errorf("%q: picture of %q, want %q", c.variants, got, c.want)
		}
	}
}

// TestCropToContentCutsTheEmptyPage: the rows of background below the
// content go, but for a margin; a blank shot is an error.
func TestCropToContentCutsTheEmptyPage(t *testing.T) {
	dir := t.TempDir()
	bg := color.RGBA{0xf6, 0xf7, 0xf9, 0xff}
	img := image.NewRGBA(image.Rect(0, 0, 40, 300))
	for y := range 300 {
		for x := range 40 {
			img.Set(x, y, bg)
		}
	}
	write := func(name string) string {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := cropToContent(write("blank.png"), filepath.Join(dir, "out.png")); err == nil {
		t.Error("a blank shot was cropped without an error")
	}
	img.Set(20, 99, color.Black) // the content ends on row 99
	out := filepath.Join(dir, "out.png")
	if err := cropToContent(write("shot.png"), out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Bounds(); b.Dx() != 40 || b.Dy() != 108 {
		t.Errorf("cropped to %v, want 40×108 (100 rows of content and a margin of 8)", b)
	}
}

// TestPicturesInChromium draws the pictures of a real run's report data
// (its first two incidents, each Chromium start costing seconds): one per
// incident, as wide as the page, cropped to the content and not blank.
func TestPicturesInChromium(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatalf("chromium is needed to draw the pictures: apt-get install -y chromium (%v)", err)
	}
	entries := slices.DeleteFunc(fixture(t), func(e entry) bool { return e.Row.Incident > 2 })
	dir := t.TempDir()
	written, err := writePictures(context.Background(), dir, entries, ranAt(entries))
	if err != nil {
		t.Fatal(err)
	}
	incidents := byIncident(entries)
	if len(written) != len(incidents) {
		t.Fatalf("%d pictures for %d incidents", len(written), len(incidents))
	}
	for i, group := range incidents {
		want := filepath.Join(dir, fmt.Sprintf("incident-%d.png", group[0].Row.Incident))
		if written[i] != want {
			t.Errorf("picture %d is %s, want %s", i, written[i], want)
			continue
		}
		f, err := os.Open(want)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		colours := map[color.Color]bool{}
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y += 3 {
			for x := b.Min.X; x < b.Max.X; x += 3 {
				colours[img.At(x, y)] = true
			}
		}
		if b.Dx() != pictureWidth || b.Dy() < 200 || b.Dy() >= 2400 || len(colours) < 50 {
			t.Errorf("%s is %v with %d colours: not an incident's timelines cropped to their content", want, b, len(colours))
		}
	}
}
