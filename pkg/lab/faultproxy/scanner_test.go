package faultproxy

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// packets frames payload as the client would: split into packets of at most
// maxPacketPayload bytes, with an empty packet after a payload that fills its
// last packet exactly, sequence ids counting from seq.
func packets(seq byte, payload []byte) []byte {
	var out []byte
	for {
		n := min(len(payload), maxPacketPayload)
		out = append(out, byte(n), byte(n>>8), byte(n>>16), seq)
		out = append(out, payload[:n]...)
		payload = payload[n:]
		seq++
		if n < maxPacketPayload {
			return out
		}
	}
}

func query(sql string) []byte { return packets(0, append([]byte{comQuery}, sql...)) }

// handshake is a minimal HandshakeResponse41 with the given capabilities.
func handshake(caps uint32) []byte {
	p := make([]byte, 32)
	binary.LittleEndian.PutUint32(p, caps)
	p = append(p, "root\x00\x00"...)
	return packets(1, p)
}

const plainCaps = 0x000fa68d // what go-sql-driver sends: no SSL, no compression

// scanAll feeds stream to a fresh scanner in the given chunk sizes (cycled)
// and returns the stream offsets at which COMMITs ended.
func scanAll(t *testing.T, stream []byte, chunks []int) []int {
	t.Helper()
	s := newScanner(nil)
	var ends []int
	off := 0
	for i := 0; off < len(stream); i++ {
		size := chunks[i%len(chunks)]
		chunk := stream[off:min(off+size, len(stream))]
		base := off
		for len(chunk) > 0 {
			n, found := s.next(chunk)
			if n == 0 {
				t.Fatal("scanner consumed nothing")
			}
			base += n
			chunk = chunk[n:]
			if found {
				ends = append(ends, base)
			}
		}
		off += size
	}
	return ends
}

func TestIsCommitStatement(t *testing.T) {
	tests := []struct {
		sql  string
		want bool
	}{
		{"COMMIT", true},
		{"commit", true},
		{"CoMmIt", true},
		{"COMMIT WORK", true},
		{"commit work;", true},
		{"COMMIT;", true},
		{"COMMIT AND NO CHAIN", true},
		{"  \n\tCOMMIT", true},
		{"/* tx 42 */ COMMIT", true},
		{"/* a */ /* b */COMMIT", true},
		{"-- note\nCOMMIT", true},
		{"# note\r\ncommit", true},
		{"COMMIT/* trailing */", true},
		{"COMMIT\n", true},
		{"COMMITTED", false},
		{"COMMIT_LOG", false},
		{"ROLLBACK", false},
		{"SELECT 'COMMIT'", false},
		{"INSERT INTO t VALUES (1); COMMIT", false},
		{"XA COMMIT 'x'", false},
		{"/*! COMMIT */", false},
		{"/* unterminated COMMIT", false},
		{"-- COMMIT", false},
		{"--COMMIT", false}, // without a space "--" starts no comment in MySQL; this is not a COMMIT
		{"COMM", false},
		{"", false},
		{"SET autocommit=1", false},
		{"START TRANSACTION", false},
	}
	for _, tt := range tests {
		if got := isStatement([]byte(tt.sql), "commit"); got != tt.want {
			t.Errorf("isStatement(%q, commit) = %v, want %v", tt.sql, got, tt.want)
		}
	}
}

func TestIsQueryOf(t *testing.T) {
	if isQueryOf([]byte("\x16COMMIT"), 0, "commit") {
		t.Error("COM_STMT_PREPARE of COMMIT taken for a COMMIT query")
	}
	if !isQueryOf([]byte("\x03COMMIT"), 0, "commit") {
		t.Error("COM_QUERY COMMIT not recognised")
	}
	// With CLIENT_QUERY_ATTRIBUTES, parameter count 0 and set count 1 come first.
	if !isQueryOf([]byte("\x03\x00\x01COMMIT"), capClientQueryAttributes, "commit") {
		t.Error("COM_QUERY COMMIT with query attributes not recognised")
	}
	if isQueryOf([]byte("\x03\x01\x01...COMMIT"), capClientQueryAttributes, "commit") {
		t.Error("COM_QUERY with attributes recognised as COMMIT")
	}
}

func TestScannerFindsCommitsAcrossAnySplit(t *testing.T) {
	var stream []byte
	stream = append(stream, handshake(plainCaps)...)
	// Authentication continuation from the client (sequence 3): never a command.
	stream = append(stream, packets(3, []byte("\x03COMMIT"))...)
	stream = append(stream, query("START TRANSACTION")...)
	stream = append(stream, query("INSERT INTO t VALUES ('COMMIT')")...)
	stream = append(stream, query("/* done */ commit")...)
	first := len(stream)
	stream = append(stream, query("SELECT 1")...)
	stream = append(stream, packets(0, []byte{0x0e})...) // COM_PING
	stream = append(stream, query("COMMIT WORK")...)
	second := len(stream)
	stream = append(stream, query("ROLLBACK")...)
	want := []int{first, second}

	splits := [][]int{{len(stream)}, {1}, {2}, {3}, {4}, {5}, {7}, {13}, {1, 4, 2, 64}}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		var sizes []int
		for range 10 {
			sizes = append(sizes, 1+r.IntN(40))
		}
		splits = append(splits, sizes)
	}
	for _, sizes := range splits {
		got := scanAll(t, stream, sizes)
		if !slices.Equal(got, want) {
			t.Fatalf("chunks %v: COMMIT ends at %v, want %v", sizes, got, want)
		}
	}
}

func TestScannerMultiPacketPayloads(t *testing.T) {
	// A payload of exactly maxPacketPayload bytes is followed by an empty
	// packet; one a little longer by a short packet. Neither continuation is
	// a command, even when its bytes read like one.
	exact := append([]byte{comQuery}, bytes.Repeat([]byte{'x'}, maxPacketPayload-1)...)
	longer := append([]byte{comQuery}, bytes.Repeat([]byte{'y'}, maxPacketPayload-1)...)
	longer = append(longer, "\x03COMMIT"...)

	var stream []byte
	stream = append(stream, handshake(plainCaps)...)
	stream = append(stream, packets(0, exact)...)
	stream = append(stream, packets(0, longer)...)
	stream = append(stream, query("COMMIT")...)
	want := []int{len(stream)}

	for _, sizes := range [][]int{{len(stream)}, {65536}, {4093}, {1 << 20, 3, 7}} {
		if got := scanAll(t, stream, sizes); !slices.Equal(got, want) {
			t.Fatalf("chunks %v: COMMIT ends at %v, want %v", sizes, got, want)
		}
	}

	// A multi-packet COMMIT (padded with a long comment) ends where its last
	// packet ends.
	padded := append([]byte{comQuery}, "COMMIT /*"...)
	padded = append(padded, bytes.Repeat([]byte{' '}, maxPacketPayload)...)
	padded = append(padded, "*/"...)
	stream = append(handshake(plainCaps), packets(0, padded)...)
	if got := scanAll(t, stream, []int{1 << 16}); !slices.Equal(got, []int{len(stream)}) {
		t.Fatalf("multi-packet COMMIT ends at %v, want %d", got, len(stream))
	}
}

func TestScannerGoesOpaqueOnTLSOrCompression(t *testing.T) {
	for _, caps := range []uint32{plainCaps | capClientSSL, plainCaps | capClientCompress} {
		stream := append(handshake(caps), query("COMMIT")...)
		if got := scanAll(t, stream, []int{3}); len(got) != 0 {
			t.Errorf("caps %#x: COMMIT recognised on a connection that cannot be parsed", caps)
		}
	}
}

func TestScannerIgnoresTheHandshakeResponse(t *testing.T) {
	// The handshake response has sequence id 1 and is never a command, even
	// if its first bytes looked like COM_QUERY.
	hs := handshake(plainCaps)
	stream := append(hs, query("COMMIT")...)
	if got := scanAll(t, stream, []int{len(stream)}); !slices.Equal(got, []int{len(stream)}) {
		t.Fatalf("COMMIT ends at %v, want %d", got, len(stream))
	}
}

func TestScannerMarksTransactionsThatSentThePattern(t *testing.T) {
	pat := []byte("coupon_deduction")
	var stream []byte
	var want []bool
	commit := func(matched bool) {
		stream = append(stream, query("COMMIT")...)
		want = append(want, matched)
	}
	stream = append(stream, handshake(plainCaps)...)
	stream = append(stream, query("INSERT INTO local_message (id) VALUES (1)")...)
	commit(false)
	stream = append(stream, query("START TRANSACTION")...)
	// A server-side prepared statement, as go-sql-driver sends for arguments.
	stream = append(stream, packets(0, []byte("\x16INSERT INTO coupon_deduction (order_no) VALUES (?)"))...)
	stream = append(stream, packets(0, []byte("\x17\x01\x00\x00\x00"))...) // COM_STMT_EXECUTE
	commit(true)
	commit(false) // the mark does not outlive its COMMIT
	stream = append(stream, query("UPDATE coupon_deduction SET x = 1")...)
	stream = append(stream, query("ROLLBACK")...)
	commit(false) // nor a ROLLBACK

	for _, sizes := range [][]int{{len(stream)}, {1}, {5}} {
		s := newScanner(func() []byte { return pat })
		var got []bool
		for off := 0; off < len(stream); {
			chunk := stream[off:min(off+sizes[0], len(stream))]
			n, found := s.next(chunk)
			off += n
			if found {
				got = append(got, s.commitMatched)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("chunk size %d: commits matched %v, want %v", sizes[0], got, want)
		}
	}
}
