package faultproxy

import (
	"bytes"
	"encoding/binary"
)

// MySQL client/server protocol facts the scanner relies on.
const (
	// maxPacketPayload is the largest payload one packet carries. A payload
	// of exactly this length is continued by the next packet (possibly an
	// empty one), which is how longer payloads are split.
	maxPacketPayload = 1<<24 - 1

	comQuery = 0x03

	capClientCompress        = 0x00000020
	capClientSSL             = 0x00000800
	capClientQueryAttributes = 0x08000000

	// prefixCap bounds how much of a command's payload the scanner keeps to
	// classify it. A COMMIT preceded by more comment text than this is not
	// recognised.
	prefixCap = 4096
)

// scanner follows the client-to-server byte stream of one connection, packet
// by packet, and reports where each COMMIT statement ends. It never changes
// or holds back bytes; the proxy forwards what it has scanned.
//
// Framing: every packet is a 3-byte little-endian payload length and a 1-byte
// sequence id. A packet whose payload is maxPacketPayload long is continued
// by the next packet. The client's first payload is its handshake response
// (or an SSL request); after that, a payload whose first packet has sequence
// id 0 is a command (authentication continuations and LOAD DATA LOCAL
// contents never start at 0). Once the handshake asks for TLS or protocol
// compression, the stream can no longer be read packet by packet and the
// scanner goes opaque: it passes everything through and recognises nothing.
type scanner struct {
	hdr  [4]byte
	hdrN int // header bytes seen of the current packet
	left int // payload bytes still to come in the current packet
	size int // payload length of the current packet

	// cont is set while a logical payload continues into the next packet.
	cont bool
	// handshakeDone is set once the client's first payload is complete.
	handshakeDone bool
	// keep is set when the current logical payload is worth classifying (the
	// handshake response, or a command).
	keep   bool
	prefix []byte

	caps   uint32
	opaque bool

	// pattern returns the statement text an armed drop waits for, or nil.
	// A command whose first prefixCap bytes contain it marks the current
	// transaction as matched; a ROLLBACK or COMMIT clears the mark.
	pattern func() []byte
	matched bool
	// commitMatched tells, after next found a COMMIT, whether its
	// transaction was matched.
	commitMatched bool
}

func newScanner(pattern func() []byte) *scanner {
	return &scanner{prefix: make([]byte, 0, prefixCap), pattern: pattern}
}

// next scans b until the end of the first complete COMMIT command in it. It
// returns how many bytes of b it consumed, and whether they end with a
// COMMIT; when found is false, all of b was consumed.
func (s *scanner) next(b []byte) (n int, found bool) {
	for n < len(b) {
		if s.opaque {
			return len(b), false
		}
		if s.hdrN < 4 {
			c := copy(s.hdr[s.hdrN:], b[n:])
			s.hdrN += c
			n += c
			if s.hdrN < 4 {
				return n, false
			}
			s.size = payloadLen(s.hdr[:])
			s.left = s.size
			if !s.cont {
				// A new logical payload begins.
				s.prefix = s.prefix[:0]
				s.keep = !s.handshakeDone || s.hdr[3] == 0
			}
		} else {
			c := min(s.left, len(b)-n)
			if s.keep && len(s.prefix) < prefixCap {
				s.prefix = append(s.prefix, b[n:n+min(c, prefixCap-len(s.prefix))]...)
			}
			s.left -= c
			n += c
		}
		if s.left > 0 {
			continue
		}
		// The current packet is complete.
		s.hdrN = 0
		if s.size == maxPacketPayload {
			s.cont = true
			continue
		}
		s.cont = false
		if !s.keep {
			continue
		}
		if !s.handshakeDone {
			s.handshakeDone = true
			if len(s.prefix) >= 4 {
				s.caps = binary.LittleEndian.Uint32(s.prefix)
			}
			if s.caps&(capClientSSL|capClientCompress) != 0 {
				s.opaque = true
			}
			continue
		}
		if isQueryOf(s.prefix, s.caps, "commit") {
			s.commitMatched, s.matched = s.matched, false
			return n, true
		}
		if isQueryOf(s.prefix, s.caps, "rollback") {
			s.matched = false
			continue
		}
		if s.pattern != nil {
			if pat := s.pattern(); len(pat) > 0 && bytes.Contains(s.prefix, pat) {
				s.matched = true
			}
		}
	}
	return n, false
}

// isQueryOf reports whether payload, the start of a command payload, is a
// COM_QUERY whose statement begins with the keyword kw (lower case).
func isQueryOf(payload []byte, caps uint32, kw string) bool {
	if len(payload) == 0 || payload[0] != comQuery {
		return false
	}
	q := payload[1:]
	if caps&capClientQueryAttributes != 0 {
		// With query attributes, the statement follows a parameter count
		// and a parameter set count. A COMMIT carries no attributes.
		count, rest, ok := readLenEncInt(q)
		if !ok || count != 0 {
			return false
		}
		if _, rest, ok = readLenEncInt(rest); !ok {
			return false
		}
		q = rest
	}
	return isStatement(q, kw)
}

// readLenEncInt reads a length-encoded integer.
func readLenEncInt(b []byte) (v uint64, rest []byte, ok bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	switch b[0] {
	case 0xfc:
		if len(b) < 3 {
			return 0, nil, false
		}
		return uint64(binary.LittleEndian.Uint16(b[1:])), b[3:], true
	case 0xfd:
		if len(b) < 4 {
			return 0, nil, false
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, b[4:], true
	case 0xfe:
		if len(b) < 9 {
			return 0, nil, false
		}
		return binary.LittleEndian.Uint64(b[1:]), b[9:], true
	case 0xfb, 0xff:
		return 0, nil, false
	default:
		return uint64(b[0]), b[1:], true
	}
}

// isStatement reports whether the SQL text q is a statement starting with the
// keyword kw, given in lower case: for "commit", "COMMIT", "commit work",
// "/* tx */ COMMIT;", "COMMIT AND NO CHAIN"... Leading whitespace and comments
// are skipped; the keyword matches in any case and must end at a
// non-identifier character. MySQL's executable comments (/*! ... */) are not
// skipped, since the server runs their content.
func isStatement(q []byte, kw string) bool {
	q = skipSpaceAndComments(q)
	if len(q) < len(kw) {
		return false
	}
	for i := range len(kw) {
		if lower(q[i]) != kw[i] {
			return false
		}
	}
	return len(q) == len(kw) || !isIdentChar(q[len(kw)])
}

func skipSpaceAndComments(q []byte) []byte {
	for len(q) > 0 {
		switch {
		case isSpace(q[0]):
			q = q[1:]
		case q[0] == '#':
			q = skipLine(q)
		case len(q) >= 3 && q[0] == '-' && q[1] == '-' && (isSpace(q[2]) || q[2] == '\n'):
			q = skipLine(q)
		case len(q) == 2 && q[0] == '-' && q[1] == '-':
			return nil
		case len(q) >= 2 && q[0] == '/' && q[1] == '*' && (len(q) < 3 || q[2] != '!'):
			end := indexCommentEnd(q[2:])
			if end < 0 {
				return nil
			}
			q = q[2+end+2:]
		default:
			return q
		}
	}
	return q
}

func skipLine(q []byte) []byte {
	for i, c := range q {
		if c == '\n' {
			return q[i+1:]
		}
	}
	return nil
}

func indexCommentEnd(q []byte) int {
	for i := 0; i+1 < len(q); i++ {
		if q[i] == '*' && q[i+1] == '/' {
			return i
		}
	}
	return -1
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isIdentChar(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= lower(c) && lower(c) <= 'z' || c >= 0x80
}
