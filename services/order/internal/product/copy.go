package product

import (
	"fmt"
	"strings"
	"time"
)

// CopyRequest is what a caller asks a batch copy for: the templates of a
// source brand, or a list of template ids, copied to a target brand.
type CopyRequest struct {
	RequestID   string
	SourceBrand string
	TemplateIDs []uint64
	TargetBrand string
	OnDuplicate OnDuplicate
}

// Validate checks a request before anything is written.
func (r CopyRequest) Validate() error {
	switch {
	case strings.TrimSpace(r.RequestID) == "":
		return invalid("request_id is required")
	case len(r.RequestID) > MaxRequestIDLen:
		return invalid("request_id is longer than %d characters", MaxRequestIDLen)
	case (r.SourceBrand == "") == (len(r.TemplateIDs) == 0):
		return invalid("give exactly one of source_brand and template_ids")
	case len(r.TemplateIDs) > MaxTemplateIDs:
		return invalid("at most %d template_ids per request", MaxTemplateIDs)
	}
	if err := checkText("target_brand", strings.TrimSpace(r.TargetBrand), MaxBrandLen); err != nil {
		return err
	}
	for _, id := range r.TemplateIDs {
		if id == 0 {
			return invalid("template_ids must be positive")
		}
	}
	_, err := ParseOnDuplicate(string(r.OnDuplicate))
	return err
}

// CopyJob is an accepted batch copy.
type CopyJob struct {
	ID          string
	RequestID   string
	TargetBrand string
	OnDuplicate OnDuplicate
	Total       int
	Chunks      int
	CreatedAt   time.Time
}

// CopyChunk is one message's worth of a job: the unit a worker processes in
// one transaction. An all-or-nothing job is a single chunk.
type CopyChunk struct {
	JobID       string   `json:"job_id"`
	Seq         int      `json:"seq"`
	TargetBrand string   `json:"target_brand"`
	OnDuplicate string   `json:"on_duplicate"`
	TemplateIDs []uint64 `json:"template_ids"`
}

// MessageID is the chunk's outbox message number: stable, so a republished
// chunk is dropped by the stream's duplicate window and by the inbox.
func (c CopyChunk) MessageID() string { return fmt.Sprintf("product-copy-%s-%d", c.JobID, c.Seq) }

// SplitChunks cuts a job's templates into chunks of at most size.
func SplitChunks(job CopyJob, templateIDs []uint64, size int) []CopyChunk {
	var chunks []CopyChunk
	for start := 0; start < len(templateIDs); start += size {
		end := min(start+size, len(templateIDs))
		chunks = append(chunks, CopyChunk{
			JobID:       job.ID,
			Seq:         len(chunks),
			TargetBrand: job.TargetBrand,
			OnDuplicate: string(job.OnDuplicate),
			TemplateIDs: templateIDs[start:end],
		})
	}
	return chunks
}

// Duplicate is one product a batch met that already existed. ExistingID is
// 0 for an all-or-nothing batch that lists the same product twice.
type Duplicate struct {
	TemplateID uint64 `json:"template_id"`
	Name       string `json:"name"`
	Model      string `json:"model"`
	ExistingID uint64 `json:"existing_id"`
}

// ChunkResult is what processing one chunk did.
type ChunkResult struct {
	Created    int
	Skipped    int
	Failed     int
	Error      string
	Duplicates []Duplicate
}

// DuplicatesError builds the all-or-nothing failure message, naming every
// duplicate so the caller knows what to remove.
func DuplicatesError(dups []Duplicate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d duplicate product(s), nothing created:", len(dups))
	for i, d := range dups {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(dups)-i)
			break
		}
		if d.ExistingID == 0 {
			fmt.Fprintf(&b, " %s appears more than once in the batch;", Key{d.Name, d.Model})
			continue
		}
		fmt.Fprintf(&b, " %s exists as product %d;", Key{d.Name, d.Model}, d.ExistingID)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Job statuses, derived from the chunks.
const (
	JobRunning   = "running"
	JobCompleted = "completed"
	// JobCompletedWithFailures: every chunk ran, some failed (all-or-nothing
	// chunks that met a duplicate, or templates that vanished).
	JobCompletedWithFailures = "completed_with_failures"
)

// CopyProgress is a job and its counters summed over its chunks.
type CopyProgress struct {
	Job         CopyJob
	ChunksDone  int
	Created     int
	Skipped     int
	Failed      int
	Errors      []string
	Duplicates  []Duplicate // the first ones met, bounded
	FailedChunk bool
}

// Done reports whether every chunk has been processed.
func (p CopyProgress) Done() bool { return p.ChunksDone == p.Job.Chunks }

// Status names the job's state.
func (p CopyProgress) Status() string {
	switch {
	case !p.Done():
		return JobRunning
	case p.FailedChunk || p.Failed > 0:
		return JobCompletedWithFailures
	}
	return JobCompleted
}
