package faultproxy

import "testing"

// BenchmarkScanner measures the scanner alone on a client stream of short
// statements and one COMMIT in every eight, fed in 16 KiB reads.
func BenchmarkScanner(b *testing.B) {
	var stream []byte
	for i := range 512 {
		if i%8 == 7 {
			stream = append(stream, query("COMMIT")...)
			continue
		}
		stream = append(stream, query("INSERT INTO coupon_deduction (order_no, coupon_id, amount) VALUES ('o-123456', 42, 1000)")...)
	}
	b.SetBytes(int64(len(stream)))
	b.ResetTimer()
	for b.Loop() {
		s := newScanner(nil)
		s.handshakeDone = true
		for off := 0; off < len(stream); {
			chunk := stream[off:min(off+16<<10, len(stream))]
			for len(chunk) > 0 {
				n, _ := s.next(chunk)
				chunk = chunk[n:]
				off += n
			}
		}
	}
}
