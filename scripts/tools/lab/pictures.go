package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// pictureWidth is the width, in CSS pixels, of an incident's picture: two
// cards side by side, readable when a Markdown page scales it down.
const pictureWidth = 1200

// pictureEntries picks the timelines an incident's picture shows: its
// broken variant and the fixed one that tells the same story ("broken"
// with "fixed", "broken/driver" with "fixed/driver"), the first such pair
// in the incident's order. An incident without that pair shows its first
// two variants.
func pictureEntries(incident []entry) []entry {
	for _, b := range incident {
		mode, story, _ := strings.Cut(b.Row.Variant, "/")
		if mode != "broken" {
			continue
		}
		want := "fixed"
		if story != "" {
			want += "/" + story
		}
		for _, f := range incident {
			if f.Row.Variant == want {
				return []entry{b, f}
			}
		}
	}
	return incident[:min(2, len(incident))]
}

// writePictures draws each incident of entries as dir/incident-N.png: the
// incident's heading, the legend and its broken and fixed timelines side by
// side, rendered by headless Chromium from the report's own HTML, so the
// docs show what `make lab` drew and nothing drawn by hand.
func writePictures(ctx context.Context, dir string, entries []entry, generated time.Time) ([]string, error) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return nil, fmt.Errorf("the pictures need chromium (apt-get install -y chromium): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "lab-pictures-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var written []string
	for _, incident := range byIncident(entries) {
		n := incident[0].Row.Incident
		var page bytes.Buffer
		if err := renderReport(&page, pictureEntries(incident), generated, true); err != nil {
			return written, err
		}
		html := filepath.Join(work, fmt.Sprintf("incident-%d.html", n))
		if err := os.WriteFile(html, page.Bytes(), 0o644); err != nil {
			return written, err
		}
		shot := filepath.Join(work, fmt.Sprintf("incident-%d-full.png", n))
		if err := screenshot(ctx, chromium, filepath.Join(work, "profile"), html, shot); err != nil {
			return written, fmt.Errorf("incident %d: %w", n, err)
		}
		out := filepath.Join(dir, fmt.Sprintf("incident-%d.png", n))
		if err := cropToContent(shot, out); err != nil {
			return written, fmt.Errorf("incident %d: %w", n, err)
		}
		written = append(written, out)
	}
	return written, nil
}

// screenshot renders page in a window taller than any incident's picture,
// with a fresh profile and nothing that reaches the network.
func screenshot(ctx context.Context, chromium, profile, page, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + profile,
		fmt.Sprintf("--window-size=%d,2400", pictureWidth), "--screenshot=" + out, "file://" + page,
	}
	cmd := exec.CommandContext(ctx, chromium, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chromium: %w\n%s", err, stderr.String())
	}
	return nil
}

// cropToContent writes the screenshot in to out without the empty page
// below its content: every row at the bottom that is all the colour of the
// bottom-left pixel (the page's background) is cut, but for a margin.
func cropToContent(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	img, err := png.Decode(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("decode %s: %w", in, err)
	}
	b := img.Bounds()
	bg := img.At(b.Min.X, b.Max.Y-1)
	br, bgG, bb, _ := bg.RGBA()
	blank := func(y int) bool {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != br || g != bgG || bl != bb {
				return false
			}
		}
		return true
	}
	bottom := b.Max.Y
	for bottom > b.Min.Y && blank(bottom-1) {
		bottom--
	}
	if bottom == b.Min.Y {
		return fmt.Errorf("%s is blank", in)
	}
	bottom = min(b.Max.Y, bottom+8)
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		return fmt.Errorf("%s: cannot crop a %T", in, img)
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, sub.SubImage(image.Rect(b.Min.X, b.Min.Y, b.Max.X, bottom))); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
